//! Editing JSON-with-comments host configs in place: comments, layout, a byte-order mark and
//! everything outside the edited property stay byte for byte (jsonc-parser's CST).

use std::path::Path;

use anyhow::Result;
use cairn_core::{CairnError, ErrorCode};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};

const BOM: &str = "\u{feff}";

/// A parsed config file.
pub struct Doc {
    bom: bool,
    pub root: CstRootNode,
}

impl Doc {
    /// Parse `text` (read from `path`, named in errors). An empty file is an empty object.
    pub fn parse(path: &Path, text: &str) -> Result<Doc> {
        let (bom, body) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let root = CstRootNode::parse(body, &ParseOptions::default()).map_err(|e| {
            invalid(
                path,
                format!("is not valid JSON(C): {e}"),
                "fix the syntax error (or move the file away) and run again",
            )
        })?;
        Ok(Doc { bom, root })
    }

    /// The top-level object, created in an empty file.
    pub fn root_object(&self, path: &Path) -> Result<CstObject> {
        if self.root.value().is_none() {
            return Ok(self.root.object_value_or_set());
        }
        self.root.object_value().ok_or_else(|| invalid(path, "is not a JSON object at the top level".into(), FIX))
    }

    pub fn text(&self) -> String {
        let body = self.root.to_string();
        if self.bom { format!("{BOM}{body}") } else { body }
    }
}

use std::path::PathBuf;

/// A parsed JSON config, or the text it starts from when the file is not there.
pub struct Config {
    pub path: PathBuf,
    before: Option<String>,
    doc: Doc,
}

impl Config {
    pub fn open(path: PathBuf) -> Result<Config> {
        let before = super::read_config(&path)?;
        let doc = Doc::parse(&path, before.as_deref().unwrap_or("{}\n"))?;
        doc.root_object(&path)?;
        Ok(Config { path, before, doc })
    }

    pub fn root(&self) -> CstObject {
        self.doc.root_object(&self.path).expect("checked in open")
    }

    /// The write that makes the file what was planned, if it changed. A file that held only
    /// what setup added (it created the file) is removed by uninstall, not left as `{}`.
    pub fn op(&self) -> Option<super::FileOp> {
        let after = self.doc.text();
        match &self.before {
            Some(before) if *before == after => None,
            Some(before)
                if self.root().properties().is_empty()
                    && Doc::parse(&self.path, before)
                        .is_ok_and(|d| d.root_object(&self.path).is_ok_and(|r| !r.properties().is_empty())) =>
            {
                Some(super::FileOp::Remove { path: self.path.clone() })
            }
            Some(_) => Some(super::FileOp::Write { path: self.path.clone(), contents: after.into_bytes() }),
            None if self.root().properties().is_empty() => None,
            None => Some(super::FileOp::Write { path: self.path.clone(), contents: after.into_bytes() }),
        }
    }
}

/// Remove `obj[name]` when it is an empty object or array (setup emptied it).
pub fn drop_if_empty(obj: &CstObject, name: &str) {
    if let Some(prop) = obj.get(name)
        && matches!(prop.value().and_then(|v| v.to_serde_value()), Some(serde_json::Value::Object(m)) if m.is_empty())
            | matches!(prop.value().and_then(|v| v.to_serde_value()), Some(serde_json::Value::Array(a)) if a.is_empty())
    {
        prop.remove();
    }
}

const FIX: &str = "fix the file by hand (or move it away) and run again; it was not changed";

/// `obj[name]` as an object: `None` when absent, an error when it is something else.
pub fn object_prop(path: &Path, obj: &CstObject, name: &str, what: &str) -> Result<Option<CstObject>> {
    let Some(prop) = obj.get(name) else { return Ok(None) };
    match prop.object_value() {
        Some(o) => Ok(Some(o)),
        None => Err(invalid(path, format!("has `{what}` but it is not an object"), FIX)),
    }
}

/// `obj[name]` as plain JSON.
pub fn value(obj: &CstObject, name: &str) -> Option<serde_json::Value> {
    obj.get(name)?.value()?.to_serde_value()
}

/// Plain JSON as a CST value to insert.
pub fn to_input(v: &serde_json::Value) -> CstInputValue {
    use serde_json::Value;
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(to_input).collect()),
        Value::Object(o) => CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), to_input(v))).collect()),
    }
}

/// Like [`to_input`], with object keys in `order` first (in that order), then the rest:
/// serde_json's objects are sorted, a host's documented layout is not.
pub fn to_input_ordered(v: &serde_json::Value, order: &[&str]) -> CstInputValue {
    use serde_json::Value;
    match v {
        Value::Array(a) => CstInputValue::Array(a.iter().map(|v| to_input_ordered(v, order)).collect()),
        Value::Object(o) => {
            let mut props: Vec<(&String, &Value)> = o.iter().collect();
            props.sort_by_key(|(k, _)| order.iter().position(|o| o == k).unwrap_or(order.len()));
            CstInputValue::Object(props.into_iter().map(|(k, v)| (k.clone(), to_input_ordered(v, order))).collect())
        }
        other => to_input(other),
    }
}

pub fn invalid(path: &Path, what: String, hint: &str) -> anyhow::Error {
    CairnError::new(ErrorCode::InvalidConfig, format!("{} {what}", path.display())).with_hint(hint).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_bom_comments_and_layout_outside_the_edit() {
        let text = "\u{feff}// top\n{\n\t\"a\": 1, /* keep */\n\t\"b\": [1,2],\n}\n";
        let doc = Doc::parse(Path::new("x.jsonc"), text).unwrap();
        let obj = doc.root_object(Path::new("x.jsonc")).unwrap();
        obj.append("c", true.into());
        let out = doc.text();
        assert!(out.starts_with("\u{feff}// top\n{\n\t\"a\": 1, /* keep */\n\t\"b\": [1,2],"), "{out:?}");
        assert!(out.contains("\t\"c\": true"), "{out:?}");
        obj.get("c").unwrap().remove();
        assert_eq!(doc.text(), text);
    }

    #[test]
    fn syntax_errors_and_non_objects_are_invalid_config() {
        let p = Path::new("x.json");
        let err = Doc::parse(p, "{ \"a\": }").err().unwrap();
        assert_eq!(err.downcast_ref::<CairnError>().unwrap().code, ErrorCode::InvalidConfig);
        let doc = Doc::parse(p, "[1]").unwrap();
        assert!(doc.root_object(p).is_err());
        let doc = Doc::parse(p, "{\"mcp\": 3}").unwrap();
        let root = doc.root_object(p).unwrap();
        assert!(object_prop(p, &root, "mcp", "mcp").is_err());
        assert!(object_prop(p, &root, "nope", "nope").unwrap().is_none());
        let empty = Doc::parse(p, "").unwrap();
        empty.root_object(p).unwrap().append("k", "v".into());
        assert!(empty.text().contains("\"k\": \"v\""));
    }
}
