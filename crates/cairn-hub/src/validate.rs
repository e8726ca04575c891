//! A push body, checked before anything touches the database: limits, then each entry.

use crate::error::{HubError, HubErrorCode, InvalidField};
use crate::wire::{MAX_FIELD_CHARS, MAX_PUSH_ENTRIES, PushEntry, PushRequest, RELATION_REQUIRED_FIELDS, ValidEntry};

/// Parse and check a push body (already within the byte limit).
pub fn push_body(body: &[u8]) -> Result<(Vec<ValidEntry>, Option<String>), HubError> {
    let request: PushRequest = serde_json::from_slice(body).map_err(|e| {
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
    let created_by = match request.created_by {
        Some(by) if by.chars().count() > MAX_FIELD_CHARS => {
            return Err(HubError::new(
                HubErrorCode::InvalidEntry,
                format!("created_by is longer than {MAX_FIELD_CHARS} characters"),
            ));
        }
        other => other,
    };
    let entries = request.entries.into_iter().enumerate().map(|(i, e)| entry(i, e)).collect::<Result<Vec<_>, _>>()?;
    check_relations(&entries)?;
    Ok((entries, created_by))
}

fn entry(index: usize, e: PushEntry) -> Result<ValidEntry, HubError> {
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
    let Some(payload @ serde_json::Value::Object(_)) = e.payload else {
        return Err(invalid(index, "payload", "must be a JSON object".into()));
    };
    let mutation_id = match e.mutation_id {
        None => None,
        Some(id) => Some(field("mutation_id", Some(id))?),
    };
    Ok(ValidEntry {
        project: field("project", Some(project))?,
        entity: field("entity", e.entity)?,
        entity_key: field("entity_key", e.entity_key)?,
        op: field("op", e.op)?,
        payload,
        mutation_id,
    })
}

fn invalid(index: usize, name: &str, what: String) -> HubError {
    HubError::new(HubErrorCode::InvalidEntry, format!("entry {index}: `{name}` {what}"))
}

/// Relation upserts must carry the fields a store needs to apply the judgment later; every
/// missing one is named, as engram's `invalid[]` does. A relation delete needs only its key.
fn check_relations(entries: &[ValidEntry]) -> Result<(), HubError> {
    let mut missing = Vec::new();
    for (index, e) in entries.iter().enumerate() {
        if e.entity != "relation" || e.op == "delete" {
            continue;
        }
        for field in RELATION_REQUIRED_FIELDS {
            let present = e.payload.get(field).is_some_and(|v| match v {
                serde_json::Value::String(s) => !s.trim().is_empty(),
                serde_json::Value::Null => false,
                _ => true,
            });
            if !present {
                missing.push(InvalidField { index, field: field.to_owned(), entity: e.entity.clone() });
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let mut err = HubError::new(HubErrorCode::ValidationError, format!("{} relation field(s) missing", missing.len()));
    err.invalid = missing;
    Err(err)
}
