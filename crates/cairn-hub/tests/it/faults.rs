//! Failures: the hub killed mid-push, PostgreSQL restarted under load.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_hub::tokens::Access;
use serde_json::{Value, json};

use crate::support::*;

/// What a pushing client knows: the keys the hub acknowledged (with their seqs), and the
/// batches that got no answer, which it must retry.
#[derive(Default)]
struct ClientLog {
    acked: BTreeMap<String, i64>,
    unanswered: Vec<Vec<Value>>,
}

fn batch(client: usize, n: usize) -> Vec<Value> {
    (0..10).map(|i| entry("alpha", &format!("c{client}-{n}-{i}"), &format!("c{client}-{n}-{i}"))).collect()
}

fn record(log: &Mutex<ClientLog>, entries: Vec<Value>, outcome: Result<(u16, Value), ureq::Error>) {
    let mut log = log.lock().unwrap();
    match outcome {
        Ok((200, body)) => {
            for (e, seq) in entries.iter().zip(seqs(&body)) {
                log.acked.insert(e["mutation_id"].as_str().unwrap().to_owned(), seq);
            }
        }
        // A 503 or a cut connection: not acknowledged, retried later.
        Ok((503, _)) | Err(_) => log.unanswered.push(entries),
        Ok((status, body)) => panic!("unexpected {status}: {body}"),
    }
}

/// Kill -9 the hub while four clients push, start it again, let the clients retry what got
/// no answer: every acknowledged seq is there under its key, and no key is stored twice.
#[test]
fn a_hub_killed_mid_push_acknowledges_only_what_it_committed() {
    let (_pg, url) = database!();
    let token = token(&url, &["alpha"], Access::ReadWrite);
    let port = free_port();
    let mut hub = ChildHub::start(&url, port);
    let log = Arc::new(Mutex::new(ClientLog::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let pushers: Vec<_> = (0..4)
        .map(|c| {
            let (client, log, stop) = (HubClient::new(&hub.base(), &token), log.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let entries = batch(c, n);
                    n += 1;
                    let outcome = client.try_push(&json!({ "entries": entries }));
                    record(&log, entries, outcome);
                }
            })
        })
        .collect();
    // Let pushes run, then kill the hub while they are in flight.
    while log.lock().unwrap().acked.len() < 200 {
        std::thread::sleep(Duration::from_millis(5));
    }
    hub.kill();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    for p in pushers {
        p.join().unwrap();
    }
    let hub = ChildHub::start(&url, port);
    let client = HubClient::new(&hub.base(), &token);
    let unanswered = std::mem::take(&mut log.lock().unwrap().unanswered);
    assert!(!unanswered.is_empty(), "the kill cut at least one push");
    for entries in unanswered {
        let outcome = client.try_push(&json!({ "entries": entries.clone() }));
        assert!(matches!(outcome, Ok((200, _))), "the retry is accepted: {outcome:?}");
        record(&log, entries, outcome);
    }

    let pulled = client.pull_all();
    let mut by_key: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for m in &pulled {
        by_key.entry(m["mutation_id"].as_str().unwrap().to_owned()).or_default().push(m["seq"].as_i64().unwrap());
    }
    assert!(by_key.values().all(|seqs| seqs.len() == 1), "no key stored twice");
    let log = log.lock().unwrap();
    for (key, seq) in &log.acked {
        assert_eq!(by_key.get(key), Some(&vec![*seq]), "acknowledged {key} at seq {seq} is pulled at that seq");
    }
    assert_eq!(by_key.len(), log.acked.len(), "everything stored was acknowledged, first time or on retry");
}

/// Stop PostgreSQL under load: requests get 503 `database_unavailable` (never a 500), the hub
/// recovers by itself when PostgreSQL is back, and nothing acknowledged is lost.
#[test]
fn postgres_restarted_under_load_gives_503_then_recovers() {
    let (pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let token = token(&url, &["alpha"], Access::ReadWrite);
    let log = Arc::new(Mutex::new(ClientLog::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let pushers: Vec<_> = (0..3)
        .map(|c| {
            let (client, log, stop) = (HubClient::new(&hub.base(), &token), log.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let entries = batch(c, n);
                    n += 1;
                    let outcome = client.try_push(&json!({ "entries": entries }));
                    record(&log, entries, outcome);
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        })
        .collect();
    while log.lock().unwrap().acked.len() < 100 {
        std::thread::sleep(Duration::from_millis(5));
    }

    pg.stop();
    let client = HubClient::new(&hub.base(), &token);
    let (status, body) = client.push(&json!({ "entries": batch(99, 0) }));
    assert_eq!((status, body["error_code"].as_str()), (503, Some("database_unavailable")), "{body}");
    assert_eq!(body["error_class"], "transient");
    let (status, body) = client.pull("since_seq=0");
    assert_eq!((status, body["error_code"].as_str()), (503, Some("database_unavailable")), "{body}");
    let mut health = agent().get(format!("{}/health", hub.base())).call().unwrap();
    assert_eq!(health.status().as_u16(), 503);
    assert_eq!(health.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    assert_eq!(health.body_mut().read_json::<Value>().unwrap()["error_code"], "database_unavailable");

    pg.start_again();
    // The hub reconnects on its own: retry (as a client backing off would) until accepted.
    let deadline = Instant::now() + Duration::from_mins(1);
    let recovered = loop {
        let (status, body) = client.push(&json!({ "entries": batch(99, 0) }));
        if status == 200 {
            break body;
        }
        assert_eq!(status, 503, "{body}");
        assert!(Instant::now() < deadline, "the hub did not recover");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(seqs(&recovered).len(), 10);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    for p in pushers {
        p.join().unwrap();
    }
    let unanswered = std::mem::take(&mut log.lock().unwrap().unanswered);
    for entries in unanswered {
        let outcome = client.try_push(&json!({ "entries": entries.clone() }));
        record(&log, entries, outcome);
    }
    let pulled: BTreeSet<i64> = client.pull_all().iter().map(|m| m["seq"].as_i64().unwrap()).collect();
    let log = log.lock().unwrap();
    assert!(log.unanswered.is_empty(), "every retry after recovery was accepted");
    for seq in log.acked.values() {
        assert!(pulled.contains(seq), "acknowledged seq {seq} survived the restart");
    }
}
