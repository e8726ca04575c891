//! A push body, checked before anything touches the database: the body's limits first (a
//! failure refuses the push), then each entry on its own (a failure refuses that entry, and
//! the others are stored).

use serde_json::Value;

use crate::error::{HubError, HubErrorCode, InvalidField};
use cairn_wire::sync::{
    MAX_FIELD_CHARS, MAX_PUSH_ENTRIES, PushEntry, PushRequest, RELATION_REQUIRED_FIELDS, ReceivedEntry, RejectedEntry,
};

/// A push body checked: the entries the hub can store, in push order, and those it refuses.
#[derive(Debug)]
pub struct CheckedPush {
    pub valid: Vec<PushEntry>,
    /// Each refused entry's index in the push and why, in push order.
    pub refused: Vec<(usize, HubError)>,
    pub created_by: Option<String>,
}

impl CheckedPush {
    /// How many entries the push held.
    pub fn received(&self) -> usize {
        self.valid.len() + self.refused.len()
    }

    /// The refusals as the answer lists them.
    pub fn rejected(&self) -> Vec<RejectedEntry> {
        self.refused.iter().map(|(index, e)| e.rejected_entry(*index)).collect()
    }

    /// A push none of whose entries can be stored is refused whole, as the hub always did: the
    /// first refusal's code and message (engram's `invalid[]` of every relation field missing
    /// when that is a `validation_error`), with every refused entry listed.
    pub fn refusal(self) -> HubError {
        let rejected = self.rejected();
        let mut fields: Vec<InvalidField> = Vec::new();
        let mut first = None;
        for (_, e) in self.refused {
            fields.extend(e.invalid.iter().cloned());
            first.get_or_insert(e);
        }
        let mut refusal =
            first.unwrap_or_else(|| HubError::new(HubErrorCode::EmptyEntries, "a push needs at least one entry"));
        if refusal.code == HubErrorCode::ValidationError {
            refusal.invalid = fields;
        }
        refusal.rejected = rejected;
        refusal
    }
}

/// Parse and check a push body (already within the byte limit).
pub fn push_body(body: &[u8]) -> Result<CheckedPush, HubError> {
    let request: PushRequest<ReceivedEntry> = serde_json::from_slice(body).map_err(|e| {
        HubError::new(HubErrorCode::MalformedBody, format!("the push body is not valid JSON for this route: {e}"))
    })?;
    if request.entries.is_empty() {
        return Err(HubError::new(HubErrorCode::EmptyEntries, "a push needs at least one entry"));
    }
    if request.entries.len() > MAX_PUSH_ENTRIES {
        return Err(HubError::new(
            HubErrorCode::TooManyEntries,
            format!("{} entries in one push; the hub takes at most {MAX_PUSH_ENTRIES}", request.entries.len()),
        ));
    }
    let created_by = created_by(request.created_by)?;
    let mut checked = CheckedPush { valid: Vec::new(), refused: Vec::new(), created_by };
    for (index, e) in request.entries.into_iter().enumerate() {
        match entry(index, e) {
            Ok(valid) => checked.valid.push(valid),
            Err(refusal) => checked.refused.push((index, refusal)),
        }
    }
    Ok(checked)
}

fn created_by(value: Option<String>) -> Result<Option<String>, HubError> {
    match value {
        Some(by) if by.chars().count() > MAX_FIELD_CHARS => Err(HubError::new(
            HubErrorCode::InvalidEntry,
            format!("created_by is longer than {MAX_FIELD_CHARS} characters"),
        )),
        Some(by) if by.contains('\0') => Err(HubError::new(
            HubErrorCode::NulCharacter,
            "created_by holds a NUL character (U+0000), which the hub cannot store",
        )),
        other => Ok(other),
    }
}

fn entry(index: usize, e: ReceivedEntry) -> Result<PushEntry, HubError> {
    let texts = [("project", &e.project), ("entity", &e.entity), ("entity_key", &e.entity_key), ("op", &e.op)];
    if let Some((name, _)) = texts.iter().find(|(_, value)| value.as_deref().is_some_and(|v| v.contains('\0'))) {
        return Err(nul(index, name));
    }
    let project = e.project.map(|p| p.trim().to_owned()).unwrap_or_default();
    if project.is_empty() {
        return Err(HubError::new(HubErrorCode::EmptyProject, format!("entry {index} has no project")));
    }
    let field = |name: &str, value: Option<String>| -> Result<String, HubError> {
        match value {
            Some(v) if !v.is_empty() && v.chars().count() <= MAX_FIELD_CHARS => Ok(v),
            Some(v) if !v.is_empty() => {
                Err(invalid(index, name, format!("is longer than {MAX_FIELD_CHARS} characters")))
            }
            _ => Err(invalid(index, name, "is missing or empty".into())),
        }
    };
    let Some(payload @ Value::Object(_)) = e.payload else {
        return Err(invalid(index, "payload", "must be a JSON object".into()));
    };
    if let Some(path) = nul_path(&payload) {
        return Err(nul(index, &format!("payload.{path}")));
    }
    let mutation_id = e.mutation_id.map(|id| mutation_id(index, id)).transpose()?;
    let valid = PushEntry {
        project: field("project", Some(project))?,
        entity: field("entity", e.entity)?,
        entity_key: field("entity_key", e.entity_key)?,
        op: field("op", e.op)?,
        payload,
        mutation_id,
    };
    check_relation(index, &valid)?;
    Ok(valid)
}

fn invalid(index: usize, name: &str, what: String) -> HubError {
    HubError::new(HubErrorCode::InvalidEntry, format!("entry {index}: `{name}` {what}"))
}

fn nul(index: usize, name: &str) -> HubError {
    HubError::new(
        HubErrorCode::NulCharacter,
        format!("entry {index}: `{name}` holds a NUL character (U+0000), which the hub cannot store"),
    )
}

/// An idempotency key is a real key: not blank, at most [`MAX_FIELD_CHARS`] characters, no
/// control character (a key that prints the same as another must not be another).
fn mutation_id(index: usize, id: String) -> Result<String, HubError> {
    let problem = if id.trim().is_empty() {
        "is empty or blank"
    } else if id.chars().count() > MAX_FIELD_CHARS {
        "is longer than 512 characters"
    } else if id.chars().any(char::is_control) {
        "holds a control character"
    } else {
        return Ok(id);
    };
    Err(HubError::new(HubErrorCode::InvalidMutationId, format!("entry {index}: `mutation_id` {problem}")))
}

/// Where the first NUL of a JSON value is (`content`, `tags[1].name`; a key holding one is
/// named with `\0`), or `None`.
fn nul_path(value: &Value) -> Option<String> {
    let after = |rest: String| if rest.is_empty() || rest.starts_with('[') { rest } else { format!(".{rest}") };
    match value {
        Value::String(s) => s.contains('\0').then(String::new),
        Value::Array(items) => {
            items.iter().enumerate().find_map(|(i, item)| nul_path(item).map(|rest| format!("[{i}]{}", after(rest))))
        }
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            if key.contains('\0') {
                return Some(key.replace('\0', "\\0"));
            }
            nul_path(item).map(|rest| format!("{key}{}", after(rest)))
        }),
        _ => None,
    }
}

/// A relation upsert must carry the fields a store needs to apply the judgment later; every
/// missing one is named, as engram's `invalid[]` does. A relation delete needs only its key.
fn check_relation(index: usize, e: &PushEntry) -> Result<(), HubError> {
    if e.entity != "relation" || e.op == "delete" {
        return Ok(());
    }
    let missing: Vec<InvalidField> = RELATION_REQUIRED_FIELDS
        .iter()
        .filter(|field| {
            !e.payload.get(**field).is_some_and(|v| match v {
                Value::String(s) => !s.trim().is_empty(),
                Value::Null => false,
                _ => true,
            })
        })
        .map(|field| InvalidField { index, field: (*field).to_owned(), entity: e.entity.clone() })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|f| f.field.as_str()).collect();
    let mut err = HubError::new(
        HubErrorCode::ValidationError,
        format!("entry {index}: relation field(s) missing: {}", names.join(", ")),
    );
    err.invalid = missing;
    Err(err)
}
