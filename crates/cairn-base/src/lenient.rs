//! Lenient field readers for requests from every door: models send numbers as `"42"` as often
//! as `42`, query strings carry nothing but text, and a blank string means "not given". The
//! request types use these in `#[serde(deserialize_with = ...)]`, so the MCP tools, the HTTP
//! API, the router and the spool all read a request the same way.

use std::str::FromStr;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// An integer given as a JSON number or as a numeric string (`"42"`, `" 42 "`).
pub fn int<'de, D: Deserializer<'de>, T: DeserializeOwned + FromStr>(d: D) -> Result<T, D::Error> {
    number(Value::deserialize(d)?).map_err(D::Error::custom)
}

/// [`int`] for optional fields: `null` and a blank string are absent.
pub fn opt_int<'de, D: Deserializer<'de>, T: DeserializeOwned + FromStr>(d: D) -> Result<Option<T>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        other => number(other).map(Some).map_err(D::Error::custom),
    }
}

/// An optional integer as a number or numeric text; `null` is absent. A blank string is an
/// error here: an HTTP query's `limit=` is no number, and its schema says so.
pub fn opt_number<'de, D: Deserializer<'de>, T: DeserializeOwned + FromStr>(d: D) -> Result<Option<T>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        other => number(other).map(Some).map_err(D::Error::custom),
    }
}

/// [`opt_number`] for a count with a default: absent or `null` is `N`.
pub fn count_or<'de, D: Deserializer<'de>, const N: usize>(d: D) -> Result<usize, D::Error> {
    Ok(opt_number(d)?.unwrap_or(N))
}

/// Optional text: blank (only white space) is absent.
pub fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.trim().is_empty()))
}

/// A flag given as a JSON boolean or as `"true"` / `"false"`; `null` is false, a blank string an
/// error (the schemas say boolean).
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(b),
        Value::String(s) => match s.trim() {
            "false" => Ok(false),
            "true" => Ok(true),
            other => Err(D::Error::custom(format!("expected true or false, got {other:?}"))),
        },
        other => Err(D::Error::custom(format!("expected true or false, got {other}"))),
    }
}

/// [`flag`] for an optional switch: absent or `null` is `None` (the reader's own default).
pub fn opt_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        other => flag(other).map(Some).map_err(D::Error::custom),
    }
}

fn number<T: DeserializeOwned + FromStr>(value: Value) -> Result<T, String> {
    match value {
        Value::String(s) => s.trim().parse().map_err(|_| format!("expected a number, got {s:?}")),
        other => serde_json::from_value(other).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Request {
        #[serde(default = "ten", deserialize_with = "super::count_or::<_, 10>")]
        limit: usize,
        #[serde(default, deserialize_with = "super::opt_number")]
        turn: Option<i64>,
        #[serde(default, deserialize_with = "super::given")]
        project: Option<String>,
        #[serde(default, deserialize_with = "super::flag")]
        all: bool,
    }

    fn ten() -> usize {
        10
    }

    fn read(value: serde_json::Value) -> Result<Request, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_come_as_numbers_or_text_and_blank_is_absent() {
        let all_absent = Request { limit: 10, turn: None, project: None, all: false };
        assert_eq!(read(json!({})).unwrap(), all_absent);
        assert_eq!(read(json!({"limit": null, "turn": null, "project": "  ", "all": null})).unwrap(), all_absent);
        let given = read(json!({"limit": " 5 ", "turn": -2, "project": "cairn", "all": "true"})).unwrap();
        assert_eq!(given, Request { limit: 5, turn: Some(-2), project: Some("cairn".into()), all: true });
        assert_eq!(read(json!({"limit": 7, "turn": "3", "all": false})).unwrap().limit, 7);
    }

    #[test]
    fn what_is_no_number_or_flag_is_an_error_that_says_so() {
        assert!(read(json!({"limit": "five"})).unwrap_err().contains("expected a number, got \"five\""));
        assert!(read(json!({"limit": -1})).is_err(), "a count is never negative");
        assert!(read(json!({"turn": 1.5})).is_err());
        assert!(read(json!({"all": "yes"})).unwrap_err().contains("expected true or false"));
        // blank text is no number and no flag (an HTTP query's `limit=` or `all=`)
        assert!(read(json!({"limit": ""})).unwrap_err().contains("expected a number"));
        assert!(read(json!({"turn": " "})).unwrap_err().contains("expected a number"));
        assert!(read(json!({"all": ""})).unwrap_err().contains("expected true or false"));
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Switch {
        #[serde(default, deserialize_with = "super::opt_flag")]
        deep: Option<bool>,
    }

    #[test]
    fn an_optional_switch_is_absent_a_flag_or_an_error() {
        let read = |v| serde_json::from_value::<Switch>(v).map(|s| s.deep).map_err(|e| e.to_string());
        assert_eq!(read(json!({})), Ok(None));
        assert_eq!(read(json!({"deep": null})), Ok(None));
        assert_eq!(read(json!({"deep": "false"})), Ok(Some(false)));
        assert_eq!(read(json!({"deep": true})), Ok(Some(true)));
        assert!(read(json!({"deep": "maybe"})).unwrap_err().contains("expected true or false"));
    }
}
