//! Every write input and every outbound record, field by field, in one file: what
//! [`RedactFields`] redacts of each. The store applies it where it accepts a write (with its
//! [`Redaction`]: `<private>` always, secrets unless `[privacy] redact_secrets = false`), and
//! with [`Redaction::OUTBOUND`] to whatever leaves the machine (`cairn export`, git chunks, a
//! hub push). A field that holds text and is missing here is a leak: add it here.
//!
//! Ids are redacted like any text: a session id holding a private tag is stored as
//! `[REDACTED]`, and a later write naming the same id is redacted the same way, so it matches.

use serde_json::Value;

use crate::agent::{ActivityEvent, ActivityRecord, SaveActivity, UserPrompt};
use crate::memory::{NewObservation, ObservationPatch};
use crate::model::{Observation, Prompt, Relation, Session};
use crate::passive::PassiveCapture;
use crate::prompts::NewPrompt;
use crate::relations::{Comparison, Judgment};
use crate::sessions::NewSession;
use crate::sync::Mutation;
use crate::text::{RedactFields, Redaction, redact_all, redact_all_opt};
use crate::transfer::{ExportData, ImportData, ObservationRecord, PromptRecord, RelationRecord, SessionRecord};

impl RedactFields for NewObservation {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.title, &mut self.content])
            | redact_all_opt(
                with,
                &mut [
                    &mut self.kind,
                    &mut self.session_id,
                    &mut self.project,
                    &mut self.scope,
                    &mut self.topic_key,
                    &mut self.tool_name,
                    &mut self.directory,
                ],
            )
    }
}

impl RedactFields for ObservationPatch {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all_opt(
            with,
            &mut [
                &mut self.kind,
                &mut self.title,
                &mut self.content,
                &mut self.project,
                &mut self.scope,
                &mut self.topic_key,
                &mut self.tool_name,
            ],
        )
    }
}

impl RedactFields for NewSession {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        with.field(&mut self.id)
            | redact_all_opt(
                with,
                &mut [&mut self.project, &mut self.directory, &mut self.agent, &mut self.parent_id, &mut self.title],
            )
    }
}

impl RedactFields for NewPrompt {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        with.field(&mut self.content)
            | redact_all_opt(with, &mut [&mut self.session_id, &mut self.project, &mut self.directory])
    }
}

impl RedactFields for PassiveCapture {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        with.field(&mut self.content)
            | redact_all_opt(
                with,
                &mut [&mut self.session_id, &mut self.project, &mut self.directory, &mut self.source],
            )
    }
}

impl RedactFields for Judgment {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.judgment_id, &mut self.relation])
            | redact_all_opt(with, &mut [&mut self.reason, &mut self.evidence, &mut self.session_id])
    }
}

impl RedactFields for Comparison {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.relation, &mut self.reasoning]) | with.opt(&mut self.model)
    }
}

impl RedactFields for UserPrompt {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.session_id, &mut self.content])
            | redact_all_opt(with, &mut [&mut self.project, &mut self.agent, &mut self.directory])
    }
}

impl RedactFields for ActivityRecord {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        let event = match &mut self.event {
            ActivityEvent::Prompt { content, stored_in } => with.field(content) | with.opt(stored_in),
            ActivityEvent::ContextInjected { fingerprint } => with.field(fingerprint),
            ActivityEvent::Save { saved_session_id, .. } => with.opt(saved_session_id),
            _ => false,
        };
        with.field(&mut self.session_id) | with.opt(&mut self.project) | event
    }
}

impl RedactFields for SaveActivity {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        with.field(&mut self.session_id)
    }
}

impl RedactFields for SessionRecord {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        with.field(&mut self.id)
            | redact_all_opt(
                with,
                &mut [&mut self.project, &mut self.directory, &mut self.agent, &mut self.parent_id, &mut self.summary],
            )
    }
}

impl RedactFields for ObservationRecord {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.session_id, &mut self.title, &mut self.content])
            | redact_all_opt(
                with,
                &mut [
                    &mut self.sync_id,
                    &mut self.kind,
                    &mut self.tool_name,
                    &mut self.project,
                    &mut self.scope,
                    &mut self.topic_key,
                ],
            )
    }
}

impl RedactFields for PromptRecord {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.session_id, &mut self.content])
            | redact_all_opt(with, &mut [&mut self.sync_id, &mut self.project])
    }
}

impl RedactFields for RelationRecord {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.sync_id, &mut self.source_id, &mut self.target_id])
            | redact_all_opt(
                with,
                &mut [
                    &mut self.relation,
                    &mut self.reason,
                    &mut self.evidence,
                    &mut self.judgment_status,
                    &mut self.marked_by_actor,
                    &mut self.marked_by_kind,
                    &mut self.marked_by_model,
                    &mut self.session_id,
                ],
            )
    }
}

/// Every record of a list, each by its own rules; whether any was redacted.
fn redact_each<T: RedactFields>(records: &mut [T], with: Redaction) -> bool {
    records.iter_mut().fold(false, |hit, record| record.redact_fields(with) | hit)
}

impl RedactFields for ImportData {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        // `|`, not `||`: every record is redacted, whatever an earlier one held.
        redact_each(&mut self.sessions, with)
            | redact_each(&mut self.observations, with)
            | redact_each(&mut self.prompts, with)
            | redact_each(&mut self.relations, with)
    }
}

impl RedactFields for Observation {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(
            with,
            &mut [
                &mut self.sync_id,
                &mut self.session_id,
                &mut self.kind,
                &mut self.title,
                &mut self.content,
                &mut self.project,
            ],
        ) | redact_all_opt(with, &mut [&mut self.tool_name, &mut self.topic_key])
    }
}

impl RedactFields for Session {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.id, &mut self.project, &mut self.directory, &mut self.agent])
            | redact_all_opt(with, &mut [&mut self.parent_id, &mut self.summary, &mut self.title])
    }
}

impl RedactFields for Prompt {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(with, &mut [&mut self.sync_id, &mut self.session_id, &mut self.content, &mut self.project])
    }
}

impl RedactFields for Relation {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        redact_all(
            with,
            &mut [
                &mut self.sync_id,
                &mut self.source_id,
                &mut self.target_id,
                &mut self.relation,
                &mut self.judgment_status,
            ],
        ) | redact_all_opt(
            with,
            &mut [
                &mut self.reason,
                &mut self.evidence,
                &mut self.marked_by_actor,
                &mut self.marked_by_kind,
                &mut self.marked_by_model,
                &mut self.session_id,
            ],
        )
    }
}

impl RedactFields for ExportData {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        // `|`, not `||`: every record is redacted, whatever an earlier one held.
        redact_each(&mut self.sessions, with)
            | redact_each(&mut self.observations, with)
            | redact_each(&mut self.prompts, with)
            | redact_each(&mut self.relations, with)
    }
}

/// A mutation's payload is another store's record as JSON: every string in it (keys are field
/// names, not text) is redacted, so a git chunk or a hub push carries no private text or secret,
/// and a pulled one is stored by the same rules as a local save.
impl RedactFields for Mutation {
    fn redact_fields(&mut self, with: Redaction) -> bool {
        with.field(&mut self.entity_key) | with.field(&mut self.project) | redact_json(&mut self.payload, with)
    }
}

/// Every string in `value` redacted; whether any was.
pub(crate) fn redact_json(value: &mut Value, with: Redaction) -> bool {
    match value {
        Value::String(s) => with.field(s),
        Value::Array(items) => items.iter_mut().fold(false, |hit, v| redact_json(v, with) | hit),
        Value::Object(map) => map.values_mut().fold(false, |hit, v| redact_json(v, with) | hit),
        _ => false,
    }
}
