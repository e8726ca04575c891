//! The wire of `POST /sync/mutations/push` and `GET /sync/mutations/pull`: engram cloud's, plus
//! an optional per-entry `mutation_id` and a push answer's `rejected[]`. docs/HUB.md documents
//! every field; keep them in step.
//!
//! The hub and the client both use these types. A client builds a [`PushEntry`] with every
//! field; the hub reads a push as [`ReceivedEntry`]s (the same fields, each maybe missing) so
//! that a missing field refuses that entry by name (`invalid_entry`, `empty_project`) rather
//! than the whole push as unparsable. Fields a hub adds to an answer are read with defaults, so
//! a client also understands an older hub (or engram's).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most entries a hub takes in one push (engram's limit).
pub const MAX_PUSH_ENTRIES: usize = 100;
/// Most bytes of one push body a hub takes (engram's limit).
pub const MAX_PUSH_BYTES: usize = 8 * 1024 * 1024;
/// Default and most mutations of one pull page.
pub const MAX_PULL_LIMIT: i64 = 100;
/// Longest `project`, `entity`, `entity_key`, `op`, `mutation_id`, `created_by` a hub accepts.
pub const MAX_FIELD_CHARS: usize = 512;

/// The fields a relation upsert's payload must carry (engram validates the same set).
pub const RELATION_REQUIRED_FIELDS: [&str; 7] =
    ["sync_id", "source_id", "target_id", "relation", "judgment_status", "marked_by_actor", "marked_by_kind"];

/// The body of `POST /sync/mutations/push`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushRequest<E = PushEntry> {
    pub entries: Vec<E>,
    /// Who pushed (`$USER`, else the host name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// One mutation of a push. `S` is how its text fields are held and `P` its payload: the
/// defaults for an entry built by a client (or checked by a hub), options for one as a hub
/// received it ([`ReceivedEntry`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PushEntry<S = String, P = Value> {
    #[serde(default)]
    pub project: S,
    /// `session`, `observation`, `prompt` or `relation`.
    #[serde(default)]
    pub entity: S,
    #[serde(default)]
    pub entity_key: S,
    /// `upsert` or `delete`.
    #[serde(default)]
    pub op: S,
    #[serde(default)]
    pub payload: P,
    /// The client's idempotency key, unique per project (cairn's: `<node id>:<journal seq>`):
    /// a push that repeats it gets the seq stored the first time instead of a second row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation_id: Option<String>,
}

/// A push entry as a hub received it, before it checks each field.
pub type ReceivedEntry = PushEntry<Option<String>, Option<Value>>;

/// The answer to a push: one seq per stored entry, in entry order, all committed; the entries
/// not stored are in `rejected` (absent when every entry was stored; always absent from an
/// older hub's answer, which stored every entry or none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushResponse {
    pub accepted_seqs: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedEntry>,
    /// engram's echo of the push's project, its source and path (cairn's hub: the first
    /// entry's project, `push`, empty).
    #[serde(default)]
    pub project: String,
    #[serde(default)]
    pub project_source: String,
    #[serde(default)]
    pub project_path: String,
}

/// An entry of a push the hub refused on its own: an error body's fields, with its index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedEntry {
    /// Its index in the push.
    pub index: usize,
    /// The HTTP status the entry alone would have been answered with (a 4xx).
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub error_class: String,
    /// A [`HubErrorCode`](crate::hub::HubErrorCode)'s name.
    #[serde(default)]
    pub error_code: String,
    #[serde(default)]
    pub error: String,
}

/// One mutation as a puller gets it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PulledMutation {
    /// The hub's order of commits.
    pub seq: i64,
    pub project: String,
    pub entity: String,
    pub entity_key: String,
    pub op: String,
    pub payload: Value,
    /// When the hub committed it (RFC 3339 UTC).
    #[serde(default)]
    pub occurred_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation_id: Option<String>,
}

/// The answer of `GET /sync/mutations/pull`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PullResponse {
    pub mutations: Vec<PulledMutation>,
    #[serde(default)]
    pub has_more: bool,
    /// The highest seq this token can see, read in the same snapshot as `mutations`: when
    /// `has_more` is false a client may store it as its next `since_seq`.
    #[serde(default)]
    pub latest_seq: i64,
    /// engram's echo of the `project` asked for (empty when none was).
    #[serde(default)]
    pub project: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry() -> PushEntry {
        PushEntry {
            project: "cairn".into(),
            entity: "observation".into(),
            entity_key: "obs-1".into(),
            op: "upsert".into(),
            payload: json!({"title": "t", "content": "c"}),
            mutation_id: Some("node:7".into()),
        }
    }

    /// A client's push is read by the hub field for field, and serialises as docs/HUB.md shows.
    #[test]
    fn a_client_push_reads_back_on_the_hub() {
        let push = PushRequest { entries: vec![entry()], created_by: Some("ana".into()) };
        let text = serde_json::to_string(&push).unwrap();
        insta::assert_snapshot!(text, @r#"{"entries":[{"project":"cairn","entity":"observation","entity_key":"obs-1","op":"upsert","payload":{"content":"c","title":"t"},"mutation_id":"node:7"}],"created_by":"ana"}"#);
        let received: PushRequest<ReceivedEntry> = serde_json::from_str(&text).unwrap();
        let e = &received.entries[0];
        assert_eq!(e.project.as_deref(), Some("cairn"));
        assert_eq!(e.entity_key.as_deref(), Some("obs-1"));
        assert_eq!(e.payload, Some(json!({"title": "t", "content": "c"})));
        assert_eq!(e.mutation_id.as_deref(), Some("node:7"));
        assert_eq!(received.created_by.as_deref(), Some("ana"));
        assert_eq!(serde_json::from_str::<PushRequest>(&text).unwrap(), push);
    }

    /// What a hub must refuse one entry for still parses: every field may be missing or null.
    #[test]
    fn a_received_entry_may_lack_any_field() {
        let received: PushRequest<ReceivedEntry> =
            serde_json::from_str(r#"{"entries":[{}, {"project": null, "payload": 5}]}"#).unwrap();
        assert_eq!(received.entries[0], ReceivedEntry::default());
        assert_eq!(received.entries[1].payload, Some(json!(5)));
        assert_eq!(received.created_by, None);
        // a text field of the wrong type still refuses the whole body
        assert!(serde_json::from_str::<PushRequest<ReceivedEntry>>(r#"{"entries":[{"entity": 5}]}"#).is_err());
        // without `mutation_id` an entry serialises as engram's
        let mut plain = entry();
        plain.mutation_id = None;
        assert!(!serde_json::to_string(&plain).unwrap().contains("mutation_id"));
    }

    #[test]
    fn push_response_round_trips_and_older_answers_read() {
        let answer = PushResponse {
            accepted_seqs: vec![4, 5],
            rejected: vec![RejectedEntry {
                index: 1,
                status: 400,
                error_class: "invalid_request".into(),
                error_code: "nul_character".into(),
                error: "entry 1: `payload.content` holds a NUL character".into(),
            }],
            project: "cairn".into(),
            project_source: "push".into(),
            project_path: String::new(),
        };
        let text = serde_json::to_string(&answer).unwrap();
        assert_eq!(serde_json::from_str::<PushResponse>(&text).unwrap(), answer);
        // every entry stored: no `rejected` at all
        let stored = PushResponse { rejected: Vec::new(), ..answer };
        assert!(!serde_json::to_string(&stored).unwrap().contains("rejected"));
        // an older hub's (or engram's) answer
        let old: PushResponse = serde_json::from_str(r#"{"accepted_seqs":[1]}"#).unwrap();
        assert_eq!(old, PushResponse { accepted_seqs: vec![1], ..PushResponse::default() });
    }

    #[test]
    fn pull_page_round_trips_and_older_pages_read() {
        let page = PullResponse {
            mutations: vec![PulledMutation {
                seq: 9,
                project: "cairn".into(),
                entity: "observation".into(),
                entity_key: "obs-1".into(),
                op: "delete".into(),
                payload: json!({}),
                occurred_at: "2026-11-28T04:12:09.517Z".into(),
                mutation_id: Some("node:7".into()),
            }],
            has_more: true,
            latest_seq: 42,
            project: "cairn".into(),
        };
        let text = serde_json::to_string(&page).unwrap();
        assert_eq!(serde_json::from_str::<PullResponse>(&text).unwrap(), page);
        let old: PullResponse = serde_json::from_str(
            r#"{"mutations":[{"seq":1,"project":"p","entity":"session","entity_key":"s","op":"upsert","payload":{}}]}"#,
        )
        .unwrap();
        assert_eq!((old.has_more, old.latest_seq, old.mutations[0].mutation_id.clone()), (false, 0, None));
    }
}
