//! Schemas of the request fields the OpenAPI document cannot derive from a Rust type (feature
//! `openapi`): keyword parameters the rules read leniently (trimmed, any case, blank for none).
//! The daemon's document and the request types of this crate share them.

/// Whitespace as Rust's `str::trim` sees it (Unicode White_Space), for patterns.
pub const TRIMMED: &str = "[\\t\\n\\x0b\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// A keyword parameter the server trims and lowercases: one of `words` in any case, with
/// whitespace around it, or blank (no value).
pub fn keyword(words: &[&str], description: &str) -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let any_case = |word: &str| -> String {
        word.chars()
            .map(|c| {
                if c.is_ascii_alphabetic() {
                    format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    let alternatives: Vec<String> = words.iter().map(|w| any_case(w)).collect();
    let pattern = format!("^{TRIMMED}*({})?{TRIMMED}*$", alternatives.join("|"));
    ObjectBuilder::new().schema_type(Type::String).pattern(Some(pattern)).description(Some(description)).into()
}

/// A scope filter: `project` or `personal` (any case); blank means none.
pub fn scope_filter() -> utoipa::openapi::Schema {
    keyword(
        &["project", "personal", "user", "global"],
        "`project` or `personal` (aliases `user`, `global`; any case); blank: no filter",
    )
}

/// A search mode: `lexical` (`keyword`, `bm25`), `semantic` (`vector`), `hybrid`; blank means
/// the default.
pub fn search_mode() -> utoipa::openapi::Schema {
    keyword(
        &["lexical", "keyword", "bm25", "semantic", "vector", "hybrid"],
        "`lexical`, `semantic` or `hybrid` (any case); blank: the default",
    )
}
