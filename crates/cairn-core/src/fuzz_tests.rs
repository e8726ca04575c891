//! Parser fuzzing: whatever bytes arrive, the parsers answer with a result or a stable error
//! code — never a panic, never an `internal` error, never a half-applied change.
//!
//! - import files: arbitrary bytes, and valid exports mutated field by field or truncated;
//! - engram databases: SQLite files of random shapes (tables, columns, types, values), and
//!   files that are not databases at all;
//! - the search query parser: any text becomes an FTS5 expression SQLite accepts, and a search
//!   on either engine answers.

use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::{Value, json};

use crate::Store;
use crate::error::ErrorCode;
use crate::memory::{NewObservation, ObservationPatch};
use crate::prompts::NewPrompt;
use crate::search::SearchQuery;
use crate::search::query;
use crate::testutil::{engine_store, obs, store_with_clock};
use crate::transfer::{ExportData, read_engram_db};

/// What a bad import file may fail with.
const IMPORT_CODES: &[ErrorCode] = &[ErrorCode::InvalidImport, ErrorCode::InvalidUtf8, ErrorCode::ContentTooLarge];

fn comparable(mut e: ExportData) -> ExportData {
    e.exported_at = String::new();
    e
}

fn populated() -> Store {
    let (mut s, _) = store_with_clock();
    s.save(&obs("p", "one", "first memory about the deploy")).unwrap();
    s.save(&NewObservation { topic_key: Some("t/k".into()), ..obs("p", "two", "second") }).unwrap();
    let d = s.save(&obs("q", "three", "deleted later")).unwrap();
    s.delete(d.id, false).unwrap();
    s.add_prompt(&NewPrompt { content: "a prompt".into(), project: Some("p".into()), ..Default::default() }).unwrap();
    s.end_session("manual-save-p", Some("summary")).unwrap();
    s
}

/// A valid export with every kind of record, as JSON.
fn sample_export() -> Value {
    let mut v = serde_json::to_value(populated().export(None).unwrap()).unwrap();
    v["relations"] = json!([{"sync_id": "r1", "source_id": "a", "target_id": "b", "relation": "related",
        "reason": "why", "confidence": 0.5, "created_at": "2026-01-01T00:00:00.000Z"}]);
    v
}

/// Import into a store with content; on failure the store must be exactly as before.
fn import_is_clean(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut store = populated();
    let before = comparable(store.export(None).unwrap());
    match store.import_bytes(bytes) {
        // Whatever it imported, the store takes new memories and prompts afterwards.
        Ok(_) => {
            let saved = store.save(&obs("p", "after the import", "a new memory"));
            prop_assert!(saved.is_ok(), "a save after the import failed: {:?}", saved.err());
            let prompt = store.add_prompt(&NewPrompt {
                content: "later".into(),
                project: Some("p".into()),
                ..Default::default()
            });
            prop_assert!(prompt.is_ok(), "a prompt after the import failed: {:?}", prompt.err());
            // Every imported memory can be edited and read back, and the store exported.
            let exported = store.export(None);
            prop_assert!(exported.is_ok(), "export after the import failed: {:?}", exported.err());
            for o in exported.unwrap().observations.iter().filter(|o| o.deleted_at.is_none()) {
                let patch = ObservationPatch { content: Some("edited after import".into()), ..Default::default() };
                let updated = store.update(o.id, &patch);
                prop_assert!(updated.is_ok(), "updating imported #{} failed: {:?}", o.id, updated.err());
            }
            let exported = store.export(None);
            prop_assert!(exported.is_ok(), "export after the edits failed: {:?}", exported.err());
        }
        Err(e) => {
            prop_assert!(IMPORT_CODES.contains(&e.code), "unexpected code {} ({})", e.code, e.message);
            prop_assert_eq!(comparable(store.export(None).unwrap()), before, "a failed import changed the store");
        }
    }
    Ok(())
}

/// Strings that break expectations: blank, control characters, other scripts, timestamps
/// in the wrong form, tags.
fn odd_string() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("")),
        Just(json!("   ")),
        Just(json!("2026-13-45T99:99:99Z")),
        Just(json!("2026-01-01 10:00:00")),
        Just(json!("2026-01-01T10:00:00+05:30")),
        Just(json!("<private>x</private>")),
        Just(json!("personal")),
        "\\PC{1,24}".prop_map(Value::String),
        "[\u{0}-\u{1f}\u{7f}\u{2028}\u{fffd}\u{10ffff}é日a-z ]{0,12}".prop_map(Value::String),
        "[0-9]{1,20}".prop_map(Value::String),
    ]
}

/// A field value: mostly odd strings (the fields are strings), sometimes anything at all.
fn odd_field() -> impl Strategy<Value = Value> {
    prop_oneof![3 => odd_string(), 1 => odd_value()]
}

/// JSON values that break expectations: wrong types, huge numbers, odd strings.
fn odd_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => Just(json!(u64::MAX)),
        1 => Just(json!(i64::MAX)),
        1 => Just(json!("")),
        1 => Just(json!("   ")),
        1 => Just(json!("2026-13-45T99:99:99Z")),
        1 => Just(json!("2026-01-01 10:00:00")),
        1 => Just(json!("<private>x</private>")),
        6 => "\\PC{1,24}".prop_map(Value::String),
        3 => "[\u{0}-\u{1f}\u{7f}\u{2028}\u{fffd}\u{10ffff}é日a-z ]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The fields of each section of an export file.
const SECTIONS: &[(&str, &[&str])] = &[
    ("sessions", &["id", "project", "directory", "agent", "parent_id", "started_at", "ended_at", "summary"]),
    (
        "observations",
        &[
            "id",
            "sync_id",
            "session_id",
            "type",
            "title",
            "content",
            "tool_name",
            "project",
            "scope",
            "topic_key",
            "revision_count",
            "duplicate_count",
            "pinned",
            "last_seen_at",
            "created_at",
            "updated_at",
            "deleted_at",
            "review_after",
        ],
    ),
    ("prompts", &["id", "sync_id", "session_id", "content", "project", "created_at"]),
    (
        "relations",
        &[
            "sync_id",
            "source_id",
            "target_id",
            "relation",
            "reason",
            "evidence",
            "confidence",
            "judgment_status",
            "marked_by_actor",
            "created_at",
            "updated_at",
        ],
    ),
];

/// One change to an export file.
#[derive(Debug, Clone)]
enum Mutation {
    /// Set a field of the first record of a section (or remove it, with `None`).
    Field(usize, usize, Option<Value>),
    /// Replace a whole section.
    Section(usize, Value),
    /// Add a copy of a section's first record with one field changed (duplicate ids, sync ids).
    Copy(usize, usize, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let field = (0..SECTIONS.len()).prop_flat_map(|s| (Just(s), 0..SECTIONS[s].1.len()));
    prop_oneof![
        6 => (field.clone(), prop::option::weighted(0.9, odd_field())).prop_map(|((s, f), v)| Mutation::Field(s, f, v)),
        1 => (0..SECTIONS.len(), odd_value()).prop_map(|(s, v)| Mutation::Section(s, v)),
        2 => (field, odd_field()).prop_map(|((s, f), v)| Mutation::Copy(s, f, v)),
    ]
}

fn apply(doc: &mut Value, m: &Mutation) {
    match m {
        Mutation::Field(s, f, value) => {
            let (section, fields) = SECTIONS[*s];
            if let Some(Value::Object(record)) = doc[section].get_mut(0) {
                match value {
                    Some(v) => record.insert(fields[*f].to_owned(), v.clone()),
                    None => record.remove(fields[*f]),
                };
            }
        }
        Mutation::Section(s, value) => doc[SECTIONS[*s].0] = value.clone(),
        Mutation::Copy(s, f, value) => {
            let (section, fields) = SECTIONS[*s];
            if let Some(Value::Object(mut copy)) = doc[section].get(0).cloned() {
                copy.insert(fields[*f].to_owned(), value.clone());
                let copy = Value::Object(copy);
                if let Some(list) = doc[section].as_array_mut() {
                    list.push(copy);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn import_of_arbitrary_bytes_fails_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        import_is_clean(&bytes)?;
    }

    #[test]
    fn import_of_a_mutated_export_succeeds_or_fails_cleanly(
        mutations in prop::collection::vec(mutation(), 1..4),
        truncate in prop::option::weighted(0.2, any::<prop::sample::Index>()),
    ) {
        let mut doc = sample_export();
        for m in &mutations {
            apply(&mut doc, m);
        }
        let mut bytes = serde_json::to_vec(&doc).unwrap();
        if let Some(at) = truncate {
            bytes.truncate(at.index(bytes.len()));
        }
        import_is_clean(&bytes)?;
    }
}

/// The tables and columns an engram database may have.
const ENGRAM_TABLES: &[(&str, &[&str])] = &[
    ("sessions", &["id", "project", "directory", "started_at", "ended_at", "summary"]),
    (
        "observations",
        &[
            "id",
            "sync_id",
            "session_id",
            "type",
            "title",
            "content",
            "tool_name",
            "project",
            "scope",
            "topic_key",
            "revision_count",
            "duplicate_count",
            "created_at",
            "updated_at",
            "deleted_at",
        ],
    ),
    ("user_prompts", &["id", "sync_id", "session_id", "content", "project", "created_at"]),
    ("memory_relations", &["sync_id", "source_id", "target_id", "relation", "reason", "confidence", "created_at"]),
    ("unrelated", &["a", "b"]),
];

/// A stored SQLite value of any type, including text that is not UTF-8 once cast.
fn sql_value() -> impl Strategy<Value = rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    prop_oneof![
        Just(V::Null),
        any::<i64>().prop_map(V::Integer),
        any::<f64>().prop_map(V::Real),
        "[a-z0-9 :-]{0,16}".prop_map(V::Text),
        Just(V::Text("2026-01-01 10:00:00".into())),
        Just(V::Text(String::new())),
        prop::collection::vec(any::<u8>(), 0..12).prop_map(V::Blob),
    ]
}

/// A database of random shape: which tables exist, which of their columns, with what values.
#[derive(Debug, Clone)]
struct EngramShape {
    tables: Vec<(usize, Vec<bool>, Vec<Vec<rusqlite::types::Value>>)>,
}

fn engram_shape() -> impl Strategy<Value = EngramShape> {
    let table = (0..ENGRAM_TABLES.len()).prop_flat_map(|t| {
        let ncols = ENGRAM_TABLES[t].1.len();
        (
            Just(t),
            prop::collection::vec(prop::bool::weighted(0.8), ncols),
            prop::collection::vec(prop::collection::vec(sql_value(), ncols), 0..4),
        )
    });
    prop::collection::vec(table, 0..6).prop_map(|tables| EngramShape { tables })
}

fn write_engram_db(path: &std::path::Path, shape: &EngramShape) {
    let conn = Connection::open(path).unwrap();
    for (t, keep, rows) in &shape.tables {
        let (name, cols) = ENGRAM_TABLES[*t];
        let exists: bool =
            conn.query_row("SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE name = ?1)", [name], |r| r.get(0)).unwrap();
        let kept: Vec<&str> = cols.iter().zip(keep).filter(|(_, k)| **k).map(|(c, _)| *c).collect();
        if exists || kept.is_empty() {
            continue;
        }
        conn.execute(&format!("CREATE TABLE {name} ({})", kept.join(", ")), []).unwrap();
        for row in rows {
            let values: Vec<&rusqlite::types::Value> =
                cols.iter().zip(keep).zip(row).filter(|((_, k), _)| **k).map(|(_, v)| v).collect();
            let marks = vec!["?"; values.len()].join(", ");
            conn.execute(&format!("INSERT INTO {name} VALUES ({marks})"), rusqlite::params_from_iter(values)).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn engram_databases_of_any_shape_are_read_or_refused(shape in engram_shape()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engram.db");
        write_engram_db(&path, &shape);
        match read_engram_db(&path) {
            Ok(data) => {
                let mut store = populated();
                let before = comparable(store.export(None).unwrap());
                if let Err(e) = store.import(&data) {
                    prop_assert!(IMPORT_CODES.contains(&e.code), "unexpected code {} ({})", e.code, e.message);
                    prop_assert_eq!(comparable(store.export(None).unwrap()), before);
                }
            }
            Err(e) => prop_assert_eq!(e.code, ErrorCode::EngramDbUnrecognized, "{}", e.message),
        }
    }

    #[test]
    fn files_that_are_not_databases_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..2048), header in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engram.db");
        // Half of them start like a real database file, so SQLite reads further before failing.
        let mut content = if header { b"SQLite format 3\0".to_vec() } else { Vec::new() };
        content.extend(bytes);
        std::fs::write(&path, &content).unwrap();
        match read_engram_db(&path) {
            // An empty file is a valid empty database: it has no engram tables.
            Ok(_) => prop_assert!(false, "a file of {} random bytes was read as an engram database", content.len()),
            Err(e) => prop_assert_eq!(e.code, ErrorCode::EngramDbUnrecognized, "{}", e.message),
        }
    }
}

/// Text heavy in FTS5 syntax, quotes, stars and scripts SQLite tokenizes differently.
fn query_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\"*()^:+\\-.,;{}\\[\\] \t\nA-Za-z0-9_éßİ\u{301}\u{200d}\u{0}]{0,40}",
        prop::collection::vec(
            prop::sample::select(vec![
                "NEAR",
                "AND",
                "OR",
                "NOT",
                "\"",
                "*",
                "(",
                ")",
                "^",
                ":",
                "title:",
                "-",
                "+",
                "auth",
                "a*",
                "\"\"",
                "\u{301}",
                "\u{200b}",
                "日本語",
                "٣",
                "Ⅻ",
                "_",
                "__",
                "x_",
                "ǅ",
                "\u{0345}",
                "\u{1d7d8}",
            ]),
            0..12,
        )
        .prop_map(|parts| parts.join(" ")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn any_query_text_is_a_valid_fts5_expression(text in query_text()) {
        let store = Store::open_in_memory().unwrap();
        if let Some(expr) = query::to_fts(&query::parse(&text)) {
            let result = store.conn().query_row(
                "SELECT count(*) FROM observations_fts WHERE observations_fts MATCH ?1",
                [&expr],
                |r| r.get::<_, i64>(0),
            );
            prop_assert!(result.is_ok(), "{text:?} became {expr:?}, which FTS5 refuses: {:?}", result.err());
        }
    }

    #[test]
    fn any_query_text_searches_on_both_engines(text in query_text(), indexed in any::<bool>()) {
        let (mut store, _) = engine_store(indexed);
        store.store.save(&obs("p", "Auth token refresh", "the login flow refreshes the token; 日本語 notes")).unwrap();
        match store.search(&SearchQuery::new(text.clone())) {
            Ok(_) => {}
            Err(e) => prop_assert_eq!(e.code, ErrorCode::EmptyField, "{:?}: {}", text, e.message),
        }
    }
}
