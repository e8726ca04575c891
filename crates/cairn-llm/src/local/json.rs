//! JSON answers from the local model: a validator of JSON prefixes that decoding consults token by
//! token. A token that would make the answer invalid JSON is never chosen (the next most likely
//! one that keeps it valid is), the answer must open with `{` or `[` (no "Here are the facts:"
//! preamble, no Markdown fence), and decoding stops as soon as that top-level value is closed.
//! Only the length cap can leave the answer incomplete.

/// What the validator expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The top-level value: only `{` or `[` (after whitespace).
    Start,
    /// Any value (after `:`, after `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ValueOrClose,
    /// After `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or the closing bracket.
    CommaOrClose,
    /// Inside a string (a key when `key`).
    Str { key: bool },
    /// After a backslash in a string.
    Escape { key: bool },
    /// Inside `\uXXXX`, `left` hex digits to go.
    Unicode { key: bool, left: u8 },
    /// Inside a number.
    Number,
    /// Inside `true`, `false` or `null`: the rest of the word.
    Literal { rest: &'static str },
    /// The top-level value is closed.
    Done,
}

/// A JSON prefix validator: fed text, it says whether the text so far can still be the start of
/// one JSON object or array, and whether that value is complete.
#[derive(Debug, Clone)]
pub struct JsonPrefix {
    expect: Expect,
    /// Open containers, innermost last: `true` for an object.
    stack: Vec<bool>,
}

impl Default for JsonPrefix {
    fn default() -> Self {
        Self { expect: Expect::Start, stack: Vec::new() }
    }
}

impl JsonPrefix {
    /// Whether the top-level value has been closed.
    pub fn is_complete(&self) -> bool {
        self.expect == Expect::Done
    }

    /// Whether `text` may follow what was fed so far, without changing the state.
    pub fn accepts(&self, text: &str) -> bool {
        let mut probe = self.clone();
        probe.feed(text)
    }

    /// Feed `text`; `false` (and a state to discard) when it makes the answer invalid JSON,
    /// including any text after the top-level value other than whitespace.
    pub fn feed(&mut self, text: &str) -> bool {
        text.chars().all(|c| self.step(c))
    }

    /// Feed `text` as `feed` does, and collect the string values it closes (keys aside) into
    /// `strings`: what the decoder reads to repair a quote and to spot a loop.
    pub fn feed_collecting(&mut self, text: &str, strings: &mut ValueStrings) -> bool {
        text.chars().all(|c| {
            let inside = self.in_value_string();
            if !self.step(c) {
                return false;
            }
            if inside {
                if self.in_value_string() {
                    strings.open.push(c);
                } else {
                    strings.closed.push(std::mem::take(&mut strings.open));
                }
            }
            true
        })
    }

    /// Whether the text so far ends inside a string value (not a key).
    pub fn in_value_string(&self) -> bool {
        matches!(
            self.expect,
            Expect::Str { key: false } | Expect::Escape { key: false } | Expect::Unicode { key: false, .. }
        )
    }

    /// Whether the text so far ends inside a list that is a field of an item, such as a fact's
    /// `message_ids`, and not the answer's own list of items.
    pub fn in_item_list(&self) -> bool {
        matches!(self.stack.as_slice(), [_, .., true, false])
    }

    fn step(&mut self, c: char) -> bool {
        match self.expect {
            Expect::Start => match c {
                c if c.is_whitespace() => true,
                '{' | '[' => self.open(c),
                _ => false,
            },
            Expect::Value => c.is_whitespace() || self.value(c),
            Expect::ValueOrClose => match c {
                c if c.is_whitespace() => true,
                ']' => self.close(false),
                _ => self.value(c),
            },
            Expect::KeyOrClose => match c {
                c if c.is_whitespace() => true,
                '"' => self.to(Expect::Str { key: true }),
                '}' => self.close(true),
                _ => false,
            },
            Expect::Key => match c {
                c if c.is_whitespace() => true,
                '"' => self.to(Expect::Str { key: true }),
                _ => false,
            },
            Expect::Colon => match c {
                c if c.is_whitespace() => true,
                ':' => self.to(Expect::Value),
                _ => false,
            },
            Expect::CommaOrClose => self.after_value(c),
            Expect::Str { key } => match c {
                '"' if key => self.to(Expect::Colon),
                '"' => self.value_done(),
                '\\' => self.to(Expect::Escape { key }),
                // A raw control character is not allowed in a JSON string.
                c if (c as u32) < 0x20 => false,
                _ => true,
            },
            Expect::Escape { key } => match c {
                '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => self.to(Expect::Str { key }),
                'u' => self.to(Expect::Unicode { key, left: 4 }),
                _ => false,
            },
            Expect::Unicode { key, left } => {
                if !c.is_ascii_hexdigit() {
                    return false;
                }
                self.to(if left == 1 { Expect::Str { key } } else { Expect::Unicode { key, left: left - 1 } })
            }
            // Numbers are checked loosely (digits, sign, point, exponent): a model that writes
            // `1.2.3` gets a parse error from the caller, which retries; grammar for numbers
            // would cost more than it saves in extraction's answers, which hold few.
            Expect::Number => match c {
                '0'..='9' | '-' | '+' | '.' | 'e' | 'E' => true,
                _ => {
                    self.value_done();
                    self.step(c)
                }
            },
            Expect::Literal { rest } => {
                let mut chars = rest.chars();
                if chars.next() != Some(c) {
                    return false;
                }
                let rest = chars.as_str();
                if rest.is_empty() { self.value_done() } else { self.to(Expect::Literal { rest }) }
            }
            Expect::Done => c.is_whitespace(),
        }
    }

    fn to(&mut self, expect: Expect) -> bool {
        self.expect = expect;
        true
    }

    fn value(&mut self, c: char) -> bool {
        match c {
            '{' | '[' => self.open(c),
            '"' => self.to(Expect::Str { key: false }),
            '-' | '0'..='9' => self.to(Expect::Number),
            't' => self.to(Expect::Literal { rest: "rue" }),
            'f' => self.to(Expect::Literal { rest: "alse" }),
            'n' => self.to(Expect::Literal { rest: "ull" }),
            _ => false,
        }
    }

    fn open(&mut self, c: char) -> bool {
        let object = c == '{';
        self.stack.push(object);
        self.to(if object { Expect::KeyOrClose } else { Expect::ValueOrClose })
    }

    fn close(&mut self, object: bool) -> bool {
        if self.stack.pop() != Some(object) {
            return false;
        }
        self.value_done()
    }

    fn value_done(&mut self) -> bool {
        self.to(if self.stack.is_empty() { Expect::Done } else { Expect::CommaOrClose })
    }

    fn after_value(&mut self, c: char) -> bool {
        let in_object = self.stack.last() == Some(&true);
        match c {
            c if c.is_whitespace() => true,
            ',' => self.to(if in_object { Expect::Key } else { Expect::Value }),
            '}' => self.close(true),
            ']' => self.close(false),
            _ => false,
        }
    }
}

/// The string values of an answer, in order, as their closing quotes arrive (the caller clears
/// `closed` when it has read them); escapes are kept as written (`\"` stays two characters).
#[derive(Debug, Clone, Default)]
pub struct ValueStrings {
    /// The string value being written, when the answer is inside one.
    open: String,
    /// The string values closed since the caller last cleared this.
    pub closed: Vec<String>,
}

impl ValueStrings {
    /// Go back inside a string value that was taken as closed, `text` written of it so far.
    pub fn reopen(&mut self, text: &str) {
        text.clone_into(&mut self.open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(text: &str) -> Option<bool> {
        let mut json = JsonPrefix::default();
        json.feed(text).then(|| json.is_complete())
    }

    #[test]
    fn a_value_is_complete_exactly_when_its_top_level_bracket_closes() {
        let text = r#"{"facts": [{"title": "a \"q\" \u00e9 }", "n": -1.5e3, "ok": true, "x": null}, []], "e": {}}"#;
        for end in 0..text.len() {
            assert_eq!(complete(&text[..end]), Some(false), "prefix {:?}", &text[..end]);
        }
        assert_eq!(complete(text), Some(true));
        assert!(serde_json::from_str::<serde_json::Value>(text).is_ok());
        assert_eq!(complete("[1, 2]  \n"), Some(true));
        assert_eq!(complete("[12]"), Some(true));
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        assert_eq!(complete(r#"{"a": "}]{["#), Some(false));
        assert_eq!(complete(r#"{"a": "}]{["}"#), Some(true));
    }

    #[test]
    fn the_answer_must_open_with_a_bracket() {
        assert_eq!(complete("  \n{"), Some(false));
        for bad in ["Here are the facts: {", "```json\n{", "\"just a string\"", "42"] {
            assert_eq!(complete(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn invalid_continuations_are_refused() {
        for bad in [
            "{\"a\" 1}",
            "{\"a\": 1,}",
            "{\"a\": tru}",
            "{a: 1}",
            "[1, 2}",
            "{\"a\": 1]",
            "[1] trailing",
            "[\"bad \\x escape\"]",
            "[\"raw\nnewline\"]",
            "{\"a\": [1,,2]}",
        ] {
            assert_eq!(complete(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn string_values_are_collected_as_they_close_and_keys_are_not() {
        let mut json = JsonPrefix::default();
        let mut strings = ValueStrings::default();
        assert!(json.feed_collecting(r#"{"facts": [{"type": "config", "content": "a \"b\"#, &mut strings));
        assert!(json.in_value_string(), "inside the content");
        assert_eq!(strings.closed, ["config"]);
        assert!(json.feed_collecting(r#"" c", "ids": ["m1"]}"#, &mut strings));
        assert_eq!(strings.closed, ["config", r#"a \"b\" c"#, "m1"]);
        assert!(!json.in_value_string());
        assert!(!json.feed_collecting("x", &mut strings), "invalid text is refused as by feed");
    }

    #[test]
    fn a_list_inside_an_item_is_told_from_the_answers_own_list() {
        let mut json = JsonPrefix::default();
        let inside = |json: &mut JsonPrefix, text: &str| {
            assert!(json.feed(text), "{text}");
            json.in_item_list()
        };
        assert!(!inside(&mut json, r#"{"facts": ["#), "the answer's own list");
        assert!(!inside(&mut json, r#"{"type": "config", "content": "x", "message_ids": "#));
        assert!(inside(&mut json, r#"["m1", "#), "a fact's ids");
        assert!(!inside(&mut json, r#""m2"]}, "#), "closed again");
        let mut bare = JsonPrefix::default();
        assert!(!inside(&mut bare, "["), "a bare list of facts is the answer's own");
        assert!(inside(&mut bare, r#"{"content": "x", "ids": ["#));
        let mut nested = JsonPrefix::default();
        assert!(!inside(&mut nested, "[["), "a list in a list is no item's field");
    }

    #[test]
    fn accepts_probes_without_moving() {
        let mut json = JsonPrefix::default();
        assert!(json.feed("{\"a\": "));
        assert!(json.accepts("1}"));
        assert!(!json.accepts("}"));
        assert!(json.feed("[]}"));
        assert!(json.is_complete());
    }
}
