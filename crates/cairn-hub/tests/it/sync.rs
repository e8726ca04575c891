//! Push and pull: round trip, idempotent retries, order, several hubs, concurrent pushers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use cairn_hub::tokens::Access;
use serde_json::json;

use crate::support::*;

#[test]
fn push_then_pull_round_trips_every_field() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));

    let relation = json!({
        "project": "alpha", "entity": "relation", "entity_key": "rel-1", "op": "upsert",
        "payload": {
            "sync_id": "rel-1", "source_id": "obs-a", "target_id": "obs-b", "relation": "conflicts_with",
            "judgment_status": "judged", "marked_by_actor": "agent", "marked_by_kind": "agent"
        }
    });
    let (status, body) =
        client.push(&json!({ "entries": [entry("alpha", "obs-a", "m1"), relation], "created_by": "laptop" }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["project"], "alpha");
    assert_eq!(body["project_source"], "request_body");
    let accepted = seqs(&body);
    assert_eq!(accepted.len(), 2);
    assert!(accepted[0] < accepted[1], "seqs follow entry order: {accepted:?}");

    let (status, body) = client.pull("since_seq=0");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["has_more"], false);
    assert_eq!(body["latest_seq"], accepted[1]);
    let mutations = body["mutations"].as_array().unwrap();
    assert_eq!(mutations.len(), 2);
    let first = &mutations[0];
    assert_eq!(first["seq"], accepted[0]);
    assert_eq!(first["project"], "alpha");
    assert_eq!(first["entity"], "observation");
    assert_eq!(first["entity_key"], "obs-a");
    assert_eq!(first["op"], "upsert");
    assert_eq!(first["payload"]["title"], "title obs-a");
    assert_eq!(first["mutation_id"], "m1");
    let at = first["occurred_at"].as_str().unwrap();
    assert!(at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T', "RFC 3339 UTC ms: {at}");
    assert_eq!(mutations[1]["payload"]["relation"], "conflicts_with");

    let (_, after) = client.pull(&format!("since_seq={}", accepted[1]));
    assert_eq!(after["mutations"].as_array().unwrap().len(), 0);
    assert_eq!(sql_i64(&url, "SELECT count(*) FROM hub_mutations WHERE created_by = 'laptop'"), 2);

    let (status, health) = {
        let mut r = agent().get(format!("{}/health", hub.base())).call().unwrap();
        (r.status().as_u16(), r.body_mut().read_json::<serde_json::Value>().unwrap())
    };
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
}

#[test]
fn pull_pages_by_limit_and_caps_it_at_100() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));
    for batch in 0..3 {
        let entries: Vec<_> =
            (0..50).map(|i| entry("alpha", &format!("k{batch}-{i}"), &format!("m{batch}-{i}"))).collect();
        assert_eq!(client.push(&json!({ "entries": entries })).0, 200);
    }
    let (_, page) = client.pull("since_seq=0&limit=1000");
    assert_eq!(page["mutations"].as_array().unwrap().len(), 100, "limit is capped at 100");
    assert_eq!(page["has_more"], true);
    let (_, page) = client.pull("since_seq=0&limit=7");
    assert_eq!(page["mutations"].as_array().unwrap().len(), 7);
    let (_, page) = client.pull("since_seq=0");
    assert_eq!(page["mutations"].as_array().unwrap().len(), 100, "default limit 100");
    assert_eq!(client.pull_all().len(), 150);
}

#[test]
fn a_retried_push_returns_the_first_seqs_and_stores_nothing_twice() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));

    let (_, first) = client.push(&json!({ "entries": [entry("alpha", "a", "m1"), entry("alpha", "b", "m2")] }));
    let first = seqs(&first);
    // The same keys again, reordered, with a new one, and a duplicate inside one push.
    let (status, again) = client.push(&json!({ "entries": [
        entry("alpha", "b", "m2"), entry("alpha", "c", "m3"), entry("alpha", "a", "m1"), entry("alpha", "c", "m3")
    ] }));
    assert_eq!(status, 200, "{again}");
    let again = seqs(&again);
    assert_eq!(again[0], first[1]);
    assert_eq!(again[2], first[0]);
    assert_eq!(again[1], again[3], "a key repeated within one push is stored once");
    assert!(again[1] > first[1]);
    assert_eq!(mutation_count(&url), 3);

    // Without a mutation_id an entry is always new (engram's clients send none).
    let mut plain = entry("alpha", "d", "unused");
    plain.as_object_mut().unwrap().remove("mutation_id");
    client.push(&json!({ "entries": [plain.clone()] }));
    client.push(&json!({ "entries": [plain] }));
    assert_eq!(mutation_count(&url), 5);

    // The key is per project: the same id in another project is another mutation.
    let other = HubClient::new(&hub.base(), &token(&url, &["beta"], Access::ReadWrite));
    let (_, beta) = other.push(&json!({ "entries": [entry("beta", "a", "m1")] }));
    assert!(!first.contains(&seqs(&beta)[0]));
}

#[test]
fn pushes_in_any_order_are_all_kept() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::ReadWrite));
    // A client's journal entries 6..10 arrive before 1..5 (a retry after a partial failure).
    let late: Vec<_> = (6..=10).map(|i| entry("alpha", &format!("k{i}"), &format!("journal-{i}"))).collect();
    let early: Vec<_> = (1..=5).map(|i| entry("alpha", &format!("k{i}"), &format!("journal-{i}"))).collect();
    assert_eq!(client.push(&json!({ "entries": late })).0, 200);
    assert_eq!(client.push(&json!({ "entries": early })).0, 200);
    let keys: BTreeSet<String> =
        client.pull_all().iter().map(|m| m["mutation_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(keys.len(), 10);
}

#[test]
fn two_hub_processes_on_one_database_serve_the_same_team() {
    let (_pg, url) = database!();
    let token = token(&url, &["alpha"], Access::ReadWrite);
    let a = ChildHub::start(&url, free_port());
    let b = ChildHub::start(&url, free_port());
    let (ca, cb) = (HubClient::new(&a.base(), &token), HubClient::new(&b.base(), &token));

    let (_, via_a) = ca.push(&json!({ "entries": [entry("alpha", "x", "m1")] }));
    let (_, via_b) = cb.push(&json!({ "entries": [entry("alpha", "y", "m2"), entry("alpha", "x", "m1")] }));
    assert_eq!(seqs(&via_b)[1], seqs(&via_a)[0], "the other hub knows the first push's key");
    let from_a: Vec<_> = ca.pull_all().iter().map(|m| m["seq"].as_i64().unwrap()).collect();
    let from_b: Vec<_> = cb.pull_all().iter().map(|m| m["seq"].as_i64().unwrap()).collect();
    assert_eq!(from_a, from_b);
    assert_eq!(from_a.len(), 2);
}

/// Many pushers at once, and a puller that advances its cursor to the last seq it saw while
/// they push: it must end with every acknowledged seq. Without the push lock a later seq can
/// commit first, the cursor passes the earlier one, and the puller never sees it.
#[test]
fn concurrent_pushers_never_let_a_puller_skip_a_seq() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let token = token(&url, &["alpha", "beta"], Access::ReadWrite);
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

    let puller = {
        let (client, done) = (HubClient::new(&hub.base(), &token), done.clone());
        std::thread::spawn(move || {
            let (mut since, mut seen) = (0_i64, Vec::new());
            loop {
                let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                let (status, body) = client.pull(&format!("since_seq={since}&limit=100"));
                assert_eq!(status, 200, "{body}");
                for m in body["mutations"].as_array().unwrap() {
                    since = m["seq"].as_i64().unwrap();
                    seen.push(since);
                }
                if finished && !body["has_more"].as_bool().unwrap() {
                    return seen;
                }
            }
        })
    };
    let pushers: Vec<_> = (0..8)
        .map(|p| {
            let (client, acked) = (HubClient::new(&hub.base(), &token), acked.clone());
            std::thread::spawn(move || {
                for batch in 0..25 {
                    let project = if p % 2 == 0 { "alpha" } else { "beta" };
                    let entries: Vec<_> = (0..4)
                        .map(|i| entry(project, &format!("p{p}-{batch}-{i}"), &format!("p{p}-{batch}-{i}")))
                        .collect();
                    let (status, body) = client.push(&json!({ "entries": entries }));
                    assert_eq!(status, 200, "{body}");
                    acked.lock().unwrap().extend(seqs(&body));
                }
            })
        })
        .collect();
    for pusher in pushers {
        pusher.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = puller.join().unwrap();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "seqs arrive in order, each once");
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), 8 * 25 * 4);
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), acked, "the puller saw every acknowledged seq");
}

#[test]
fn pull_filters_by_project_when_asked() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let client = HubClient::new(&hub.base(), &token(&url, &["alpha", "beta"], Access::ReadWrite));
    client.push(&json!({ "entries": [entry("alpha", "a", "m1"), entry("beta", "b", "m2")] }));
    let (_, body) = client.pull("since_seq=0&project=beta");
    let projects: BTreeMap<String, usize> =
        body["mutations"].as_array().unwrap().iter().fold(BTreeMap::new(), |mut acc, m| {
            *acc.entry(m["project"].as_str().unwrap().to_owned()).or_default() += 1;
            acc
        });
    assert_eq!(projects, BTreeMap::from([("beta".to_owned(), 1)]));
    assert_eq!(body["project"], "beta");
}
