//! Bodies and queries the hub refuses: each with its status and stable code, nothing written.

use cairn_hub::tokens::Access;
use serde_json::{Value, json};

use crate::support::*;

fn relation_missing(fields: &[&str]) -> Value {
    let mut payload = json!({
        "sync_id": "r1", "source_id": "a", "target_id": "b", "relation": "supersedes",
        "judgment_status": "judged", "marked_by_actor": "me", "marked_by_kind": "human"
    });
    for f in fields {
        payload.as_object_mut().unwrap().remove(*f);
    }
    json!({ "entries": [entry("alpha", "ok", "m-ok"), { "project": "alpha", "entity": "relation", "entity_key": "r1", "op": "upsert", "payload": payload }] })
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
            relation_missing(&["source_id", "marked_by_kind"]).to_string().into_bytes(),
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

    let (_, answer) = client.push(&relation_missing(&["source_id", "marked_by_kind"]));
    assert_eq!(answer["reason_code"], "validation_error");
    assert_eq!(
        answer["invalid"],
        json!([{ "index": 1, "field": "source_id", "entity": "relation" }, { "index": 1, "field": "marked_by_kind", "entity": "relation" }])
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
