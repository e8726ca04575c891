//! The one way an error table is written: a row per code with its stable name, its HTTP status
//! and its CLI exit code, side by side, so they cannot drift apart and no list is kept by hand.

/// Defines an error-code enum from one table.
///
/// ```
/// cairn_wire::error_table! {
///     /// What went wrong.
///     pub enum Code;
///     /// Nothing there.
///     Missing => "missing", 404, 4;
///     Broken => "broken", 500, 1;
/// }
/// assert_eq!(Code::from_name("missing"), Some(Code::Missing));
/// assert_eq!((Code::Broken.http_status(), Code::Broken.exit_code()), (500, 1));
/// assert_eq!(Code::ALL.len(), 2);
/// ```
///
/// Each code gets `as_str` (its stable snake_case name, part of a public contract: never renamed
/// or reused), `from_name`, `http_status`, `exit_code`, and `ALL` (every code in table order,
/// for docs, OpenAPI and tests).
#[macro_export]
macro_rules! error_table {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident;
        $($(#[doc = $doc:literal])* $code:ident => $text:literal, $status:literal, $exit:literal;)*
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[doc = $doc])* $code,)*
        }

        impl $name {
            /// Every code, in table order.
            pub const ALL: &'static [$name] = &[$(Self::$code),*];

            /// The stable name clients match on.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$code => $text,)*
                }
            }

            /// The code with this name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($text => Some(Self::$code),)*
                    _ => None,
                }
            }

            /// The HTTP status a server answers with.
            pub fn http_status(self) -> u16 {
                match self {
                    $(Self::$code => $status,)*
                }
            }

            /// The CLI exit code (docs/CLI.md, "Exit codes"): 3 bad input, 4 not found, 5
            /// conflict, 6 unavailable or a store that cannot be used, 1 anything else.
            pub fn exit_code(self) -> i32 {
                match self {
                    $(Self::$code => $exit,)*
                }
            }
        }
    };
}
