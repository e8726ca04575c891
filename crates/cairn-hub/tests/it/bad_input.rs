//! Bodies and queries the hub refuses: each with its status and stable code, nothing written.

use cairn_hub::tokens::Access;
use serde_json::{Value, json};

use crate::support::*;

fn relation_missing(fields: &[&str]) -> Value {
    json!({ "entries": [entry("alpha", "ok", "m-ok"), relation_entry(fields)] })
}

/// A relation upsert without `fields`.
fn relation_entry(fields: &[&str]) -> Value {
    let mut payload = json!({
        "sync_id": "r1", "source_id": "a", "target_id": "b", "relation": "supersedes",
        "judgment_status": "judged", "marked_by_actor": "me", "marked_by_kind": "human"
    });
    for f in fields {
        payload.as_object_mut().unwrap().remove(*f);
    }
    json!({ "project": "alpha", "entity": "relation", "entity_key": "r1", "op": "upsert", "payload": payload })
}

#[test]
fn malformed_and_oversized_pushes_are_refused_with_a_code() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));
    let mut no_entity = entry("alpha", "k", "m");
    no_entity.as_object_mut().unwrap().remove("entity");
    let mut array_payload = entry("alpha", "k", "m");
    array_payload["payload"] = json!([1, 2]);
    let mut long_key = entry("alpha", "k", "m");
    long_key["entity_key"] = json!("k".repeat(600));
    let too_many: Vec<_> = (0..101).map(|i| entry("alpha", &format!("k{i}"), &format!("m{i}"))).collect();
    let huge = json!({ "entries": [{ "project": "alpha", "entity": "observation", "entity_key": "big", "op": "upsert",
        "payload": { "content": "x".repeat(8 * 1024 * 1024) } }] });

    let table: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("not JSON", b"{not json".to_vec(), 400, "malformed_body"),
        ("empty body", Vec::new(), 400, "malformed_body"),
        ("no entries field", br#"{"created_by":"x"}"#.to_vec(), 400, "malformed_body"),
        ("entries not a list", br#"{"entries":{}}"#.to_vec(), 400, "malformed_body"),
        ("no entries", br#"{"entries":[]}"#.to_vec(), 400, "empty_entries"),
        (
            "no project",
            json!({ "entries": [{ "entity": "observation", "entity_key": "k", "op": "upsert", "payload": {} }] })
                .to_string()
                .into_bytes(),
            400,
            "empty_project",
        ),
        ("blank project", json!({ "entries": [entry("  ", "k", "m")] }).to_string().into_bytes(), 400, "empty_project"),
        ("no entity", json!({ "entries": [no_entity] }).to_string().into_bytes(), 400, "invalid_entry"),
        ("payload not an object", json!({ "entries": [array_payload] }).to_string().into_bytes(), 400, "invalid_entry"),
        ("key too long", json!({ "entries": [long_key] }).to_string().into_bytes(), 400, "invalid_entry"),
        (
            "relation without its fields",
            json!({ "entries": [relation_entry(&["source_id", "marked_by_kind"])] }).to_string().into_bytes(),
            400,
            "validation_error",
        ),
        ("101 entries", json!({ "entries": too_many }).to_string().into_bytes(), 413, "too_many_entries"),
        ("over 8 MiB", huge.to_string().into_bytes(), 413, "payload_too_large"),
    ];
    for (what, body, status, code) in table {
        let (got, answer) = client.push_raw(body);
        assert_eq!((got, answer["error_code"].as_str()), (status, Some(code)), "{what}: {answer}");
        assert!(answer["error_class"].is_string() && answer["error"].is_string(), "{what}: {answer}");
    }
    assert_eq!(mutation_count(&url), 0, "no refused push wrote anything");

    let (_, answer) = client.push(&json!({ "entries": [relation_entry(&["source_id", "marked_by_kind"])] }));
    assert_eq!(answer["reason_code"], "validation_error");
    assert_eq!(
        answer["invalid"],
        json!([{ "index": 0, "field": "source_id", "entity": "relation" }, { "index": 0, "field": "marked_by_kind", "entity": "relation" }])
    );
    // With every field the same relation is accepted.
    assert_eq!(client.push(&relation_missing(&[])).0, 200);
}

#[test]
fn bad_pull_queries_and_unknown_routes_are_refused_with_a_code() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));
    for query in ["since_seq=-1", "since_seq=abc", "limit=0", "limit=x", "since_seq=99999999999999999999"] {
        let (status, body) = client.pull(query);
        assert_eq!((status, body["error_code"].as_str()), (400, Some("invalid_query")), "{query}: {body}");
    }
    let mut r = agent().get(format!("{}/sync/nothing", hub.base())).call().unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.body_mut().read_json::<Value>().unwrap()["error_code"], "not_found");
}

/// A push entry with `field` set to `value` (a top-level field, or one of the payload's).
fn entry_with(key: &str, field: &str, value: Value) -> Value {
    let mut e = entry("alpha", key, &format!("m-{key}"));
    if field.starts_with("payload.") {
        e["payload"][field.trim_start_matches("payload.")] = value;
    } else {
        e[field] = value;
    }
    e
}

/// Entries the hub cannot store (a NUL, which PostgreSQL refuses in text and JSONB; a blank,
/// empty, over-long or control-character `mutation_id`) are refused one by one with their
/// code, and the valid entries of the same push are stored; a push of only bad entries is
/// refused whole, as before, and lists them too.
#[test]
fn entries_the_hub_cannot_store_are_refused_one_by_one_and_the_rest_is_stored() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));
    let mut nul_in_a_payload_key = entry("alpha", "k-key", "m-k-key");
    nul_in_a_payload_key["payload"]["bad\u{0}key"] = json!("v");
    let entries = vec![
        entry("alpha", "ok-1", "m-ok-1"),
        entry_with("nul-content", "payload.content", json!("a\u{0}b")),
        entry_with("blank-id", "mutation_id", json!("  ")),
        entry("alpha", "ok-2", "m-ok-2"),
        entry_with("empty-id", "mutation_id", json!("")),
        entry_with("long-id", "mutation_id", json!("m".repeat(513))),
        entry_with("control-id", "mutation_id", json!("m\u{1}x")),
        entry_with("nul-key", "entity_key", json!("k\u{0}")),
        nul_in_a_payload_key,
        entry_with("nested", "payload.tags", json!(["fine", {"deep": "x\u{0}"}])),
        entry("alpha", "ok-3", "m-ok-3"),
    ];
    let body = json!({ "entries": entries });
    let (status, answer) = client.push(&body);
    assert_eq!(status, 200, "{answer}");
    let rejected: Vec<(u64, &str, u64)> = answer["rejected"]
        .as_array()
        .unwrap_or_else(|| panic!("no rejected[] in {answer}"))
        .iter()
        .map(|r| (r["index"].as_u64().unwrap(), r["error_code"].as_str().unwrap(), r["status"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        rejected,
        vec![
            (1, "nul_character", 400),
            (2, "invalid_mutation_id", 400),
            (4, "invalid_mutation_id", 400),
            (5, "invalid_mutation_id", 400),
            (6, "invalid_mutation_id", 400),
            (7, "nul_character", 400),
            (8, "nul_character", 400),
            (9, "nul_character", 400),
        ],
        "{answer}"
    );
    for r in answer["rejected"].as_array().unwrap() {
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    }
    let reason = |index: u64| {
        answer["rejected"].as_array().unwrap().iter().find(|r| r["index"] == index).unwrap()["error"].to_string()
    };
    assert!(reason(1).contains("payload.content"), "{answer}");
    assert!(reason(9).contains("payload.tags[1].deep"), "{answer}");
    let stored = seqs(&answer);
    assert_eq!(stored.len(), 3, "one seq per stored entry: {answer}");
    let pulled: Vec<String> = client.pull_all().iter().map(|m| m["entity_key"].as_str().unwrap().to_owned()).collect();
    assert_eq!(pulled, ["ok-1", "ok-2", "ok-3"]);

    // The same push again: the same seqs for the stored entries, the same refusals, nothing new.
    let (status, again) = client.push(&body);
    assert_eq!((status, seqs(&again)), (200, stored), "{again}");
    assert_eq!(again["rejected"], answer["rejected"]);
    assert_eq!(mutation_count(&url), 3);

    // Only bad entries: refused whole with the first one's code, each listed.
    let (status, answer) = client.push(&json!({ "entries": [entry_with("n", "payload.content", json!("\u{0}")), entry_with("b", "mutation_id", json!(" "))] }));
    assert_eq!((status, answer["error_code"].as_str()), (400, Some("nul_character")), "{answer}");
    assert_eq!(answer["rejected"].as_array().map(Vec::len), Some(2), "{answer}");
    // A NUL in the push's own `created_by` refuses the push.
    let (status, answer) =
        client.push(&json!({ "entries": [entry("alpha", "ok-4", "m-ok-4")], "created_by": "me\u{0}" }));
    assert_eq!((status, answer["error_code"].as_str()), (400, Some("nul_character")), "{answer}");
    assert_eq!(mutation_count(&url), 3);
}

/// A relation without its fields next to a valid entry: the relation is refused (engram's
/// `validation_error`, the fields named), the valid entry stored.
#[test]
fn a_relation_without_its_fields_is_refused_alone() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));
    let (status, answer) = client.push(&relation_missing(&["source_id", "marked_by_kind"]));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(seqs(&answer).len(), 1, "{answer}");
    let rejected = &answer["rejected"][0];
    assert_eq!(
        (rejected["index"].as_u64(), rejected["error_code"].as_str()),
        (Some(1), Some("validation_error")),
        "{answer}"
    );
    assert!(rejected["error"].as_str().unwrap().contains("source_id"), "{answer}");
    assert_eq!(mutation_count(&url), 1);
}
