//! NUL characters (U+0000) in text that is to be stored. A NUL is never part of what a person
//! or an agent means to write, and PostgreSQL (a hub's store) refuses it in text and JSONB, so a
//! stored one could never sync: every write refuses it (`nul_character`). Other control
//! characters (a tab, an escape sequence pasted from a terminal) are text like any other.

use serde_json::Value;

use crate::error::{CairnError, ErrorCode, Result};

/// Refuse `text` when it holds a NUL, naming `field`.
pub fn refuse_nul(field: &str, text: &str) -> Result<()> {
    match text.find('\0') {
        None => Ok(()),
        Some(at) => Err(nul_error(field, Some(at))),
    }
}

/// Refuse a JSON value when a string or an object key in it holds a NUL, naming where it is
/// (`observations[2].content`), after `prefix` when one is given.
pub fn refuse_nul_in_json(prefix: &str, value: &Value) -> Result<()> {
    match nul_path(value) {
        None => Ok(()),
        Some(path) => Err(nul_error(&join(prefix, &path), None)),
    }
}

/// Where the first NUL of `value` is, as a path from it (`content`, `tags[1]`, `a.b`; empty
/// when `value` is itself such a string), or `None` when it holds none.
pub fn nul_path(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => s.contains('\0').then(String::new),
        Value::Array(items) => {
            items.iter().enumerate().find_map(|(i, item)| nul_path(item).map(|rest| format!("[{i}]{}", dotted(&rest))))
        }
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            let key_text = key.replace('\0', "\\0");
            if key.contains('\0') {
                return Some(key_text);
            }
            nul_path(item).map(|rest| format!("{key_text}{}", dotted(&rest)))
        }),
        _ => None,
    }
}

/// A path's continuation after a parent: `.field`, or `[i]` as it is.
fn dotted(rest: &str) -> String {
    if rest.is_empty() || rest.starts_with('[') { rest.to_owned() } else { format!(".{rest}") }
}

fn join(prefix: &str, path: &str) -> String {
    match (prefix.is_empty(), path.is_empty()) {
        (true, _) => path.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) => format!("{prefix}{}", dotted(path)),
    }
}

fn nul_error(field: &str, at: Option<usize>) -> CairnError {
    let field = if field.is_empty() { "the text" } else { field };
    let place = at.map(|at| format!(" at byte {at}")).unwrap_or_default();
    CairnError::new(ErrorCode::NulCharacter, format!("{field} holds a NUL character (U+0000){place}"))
        .with_hint("remove the NUL: it is no text anyone means to keep, and a hub could not store it")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_nul_is_refused_naming_the_field_and_other_controls_are_text() {
        assert!(refuse_nul("content", "tab\t, newline\n, escape \u{1b}[0m, bell \u{7}").is_ok());
        let err = refuse_nul("content", "a\0b").unwrap_err();
        assert_eq!(err.code, ErrorCode::NulCharacter);
        assert_eq!(err.message, "content holds a NUL character (U+0000) at byte 1");
        assert!(err.hint.is_some());
    }

    #[test]
    fn the_path_of_a_nul_in_json_names_keys_and_indexes() {
        assert_eq!(nul_path(&json!({"a": "ok", "b": [1, "x", {"c": "d\u{0}"}]})).as_deref(), Some("b[2].c"));
        assert_eq!(nul_path(&json!([["\u{0}"]])).as_deref(), Some("[0][0]"));
        assert_eq!(nul_path(&json!({"bad\u{0}key": 1})).as_deref(), Some("bad\\0key"));
        assert_eq!(nul_path(&json!("\u{0}")).as_deref(), Some(""));
        assert_eq!(nul_path(&json!({"a": ["\t", 1.5, null, true], "b": "\u{1}"})), None);
        let err = refuse_nul_in_json("payload", &json!({"tags": ["x\u{0}"]})).unwrap_err();
        assert_eq!(err.message, "payload.tags[0] holds a NUL character (U+0000)");
        let err = refuse_nul_in_json("", &json!({"observations": [{"content": "\u{0}"}]})).unwrap_err();
        assert!(err.message.starts_with("observations[0].content holds"), "{}", err.message);
    }
}
