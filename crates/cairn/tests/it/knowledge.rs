//! Issue 42's replaced decision through a real `cairn serve` (temp data dir and HOME, port 0 on
//! loopback): four decisions on the product cache key scheme saved with `POST /observations`,
//! then a fifth that replaces them in other words. "what cache key scheme do we use now"
//! answers the fifth first before any judge (the recency prior, with the default model found
//! in the data dir), and after the daemon's own LLM judge (`cairn llm use openai` pointed at a
//! scripted server on loopback, taken up by the running daemon, then `POST /conflicts/scan`)
//! recorded `supersedes`: the replaced ones kept and annotated `superseded_by: #<fifth>`.
//! Deleting the fifth makes the fourth current again.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http};

const QUESTION: &str = "/search?q=what+cache+key+scheme+do+we+use+now&project=shop";

const DECISIONS: [(&str, &str); 5] = [
    ("Product cache key scheme", "Product cache keys are product:{id}."),
    ("Product cache key scheme: add locale", "Product cache keys are product:{id}:{locale}."),
    ("Product cache key scheme: add currency", "Product cache keys are product:{id}:{locale}:{currency}."),
    ("Product cache key scheme: version prefix", "Product cache keys are v2:product:{id}:{locale}:{currency}."),
    (
        "Catalogue entries cached by content hash",
        "We no longer build product cache keys from the id, locale and currency: an entry is keyed by the sha256 \
         of its rendered JSON, so any change invalidates it by itself.",
    ),
];

/// An OpenAI-compatible judge on loopback: the content-hash memory (A, the newer) replaces the
/// older one, any other pair refines ("related"); anything else is answered "ok". Records the
/// judge requests it answered.
fn scripted_judge() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let judged = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&judged);
    let (addr, _) = crate::support::openai_server("judge-1", (100, 20), move |request| {
        let asked = request["messages"][1]["content"].as_str().unwrap_or_default();
        if !asked.starts_with("Memory A") {
            return "ok".to_owned();
        }
        seen.lock().unwrap().push(asked.to_owned());
        let newer = asked.split("Memory B").next().unwrap_or_default();
        if newer.contains("sha256") {
            r#"{"relation": "supersedes", "confidence": 0.92, "reason": "keys by content hash now"}"#.to_owned()
        } else {
            r#"{"relation": "related", "confidence": 0.8, "reason": "the same scheme, refined"}"#.to_owned()
        }
    });
    (addr, judged)
}

fn link_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        std::os::unix::fs::symlink(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Polls `done` every 100 ms. Not a limit on anything measured: a guard against a hang while
/// the daemon works in the background.
fn wait_until(what: &str, mut done: impl FnMut() -> Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let Some(why_not) = done() else { return };
        assert!(Instant::now() < deadline, "{what}: {why_not}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Each hit's id and annotations, in order.
fn ids_and_notes(hits: &Value) -> Vec<(i64, Vec<String>)> {
    let notes = |h: &Value| -> Vec<String> {
        h["annotations"].as_array().into_iter().flatten().filter_map(|n| n.as_str().map(str::to_owned)).collect()
    };
    hits.as_array()
        .unwrap_or_else(|| panic!("not a list of hits: {hits:#}"))
        .iter()
        .map(|h| (h["id"].as_i64().unwrap_or_default(), notes(h)))
        .collect()
}

fn marked(notes: &[String]) -> bool {
    notes.iter().any(|n| n.contains("superseded_by"))
}

#[test]
fn a_real_daemon_answers_the_replacing_decision_first_before_and_after_its_judge() {
    let e5 = cairn_embed::install::test_e5_dir();
    if !e5.join("model.safetensors").is_file() {
        eprintln!("note: no multilingual-e5-small in {}; skipping (scripts/install-test-deps.sh e5)", e5.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (data, home) = (dir.path().join("data"), dir.path().join("home"));
    std::fs::create_dir_all(&home).unwrap();
    // The default model, where the daemon looks for it (as `cairn model install` leaves it).
    link_dir(&e5, &data.join("models").join("multilingual-e5-small"));
    let home_var = home.to_str().unwrap();
    let daemon = Daemon::start_with(&data, &[("HOME", home_var), ("CAIRN_MODEL_INSTALL", "never")], Stdio::null());
    let addr = daemon.addr;

    let mut ids = Vec::new();
    for (i, (title, content)) in DECISIONS.into_iter().enumerate() {
        let session = format!("ses-cache-{i}");
        assert_eq!(http(addr, "POST", "/sessions", Some(&json!({"id": session, "project": "shop"}))).0, 201);
        let body =
            json!({"session_id": session, "project": "shop", "type": "decision", "title": title, "content": content});
        let (status, saved) = http(addr, "POST", "/observations", Some(&body));
        assert_eq!(status, 201, "{saved:#}");
        ids.push(saved["id"].as_i64().unwrap());
    }
    let fifth = ids[4];
    wait_until("the five embedded", || {
        let stats = http(addr, "GET", "/stats", None).1;
        (stats["embeddings_stored"] != 5).then(|| stats.to_string())
    });

    // Before any judge (none is configured: the arrival judge's rules leave the pairs pending).
    let (status, hits) = http(addr, "GET", QUESTION, None);
    assert_eq!(status, 200, "{hits:#}");
    let before = ids_and_notes(&hits);
    assert_eq!(before.first().map(|h| h.0), Some(fifth), "the recency prior: {hits:#}");
    assert!(before.iter().all(|(_, notes)| !marked(notes)), "{hits:#}");

    // The daemon's judge: a model configured while it runs, then a scan of what it already holds.
    let (judge, judged) = scripted_judge();
    let out = cairn()
        .args(["llm", "use", "openai", "--base-url", &format!("http://{judge}/v1"), "--model", "judge-1"])
        .env("CAIRN_DATA_DIR", &data)
        .env("HOME", &home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut offset = 0;
    wait_until("the scan judged every pair", || {
        let scan = json!({"project": "shop", "semantic": true, "apply": true, "offset": offset});
        let (status, result) = http(addr, "POST", "/conflicts/scan", Some(&scan));
        if status == 503 {
            // The daemon takes up `cairn llm use` within seconds.
            return Some(result.to_string());
        }
        assert_eq!(status, 200, "{result:#}");
        offset = result["next_offset"].as_u64().unwrap_or_default();
        (result["semantic_remaining"] != 0).then(|| result.to_string())
    });
    assert!(judged.lock().unwrap().len() >= 4, "the model was asked");
    let (_, verdicts) = http(addr, "GET", "/conflicts?project=shop&status=judged&limit=100", None);
    let replaced: Vec<&Value> =
        verdicts["relations"].as_array().unwrap().iter().filter(|r| r["relation"] == "supersedes").collect();
    assert_eq!(replaced.len(), 4, "the fifth replaces each older one: {verdicts:#}");
    assert!(replaced.iter().all(|r| r["marked_by_kind"] == "llm" && r["marked_by_model"] == "judge-1"), "{verdicts:#}");

    let (_, hits) = http(addr, "GET", QUESTION, None);
    let after = ids_and_notes(&hits);
    assert_eq!(after.first().map(|h| h.0), Some(fifth), "judged: {hits:#}");
    assert!(!marked(&after[0].1), "the current one is not marked: {hits:#}");
    for old in &ids[..4] {
        let (_, notes) = after.iter().find(|h| h.0 == *old).unwrap_or_else(|| panic!("#{old} kept: {hits:#}"));
        let by = format!("superseded_by: #{fifth}");
        assert!(notes.iter().any(|n| n.starts_with(&by)), "#{old} marked replaced: {hits:#}");
    }

    // The replacement deleted: the fourth is current again, and says nothing of a replacement.
    assert_eq!(http(addr, "DELETE", &format!("/observations/{fifth}"), None).0, 200);
    let (_, hits) = http(addr, "GET", QUESTION, None);
    let deleted = ids_and_notes(&hits);
    assert_eq!(deleted.first().map(|h| h.0), Some(ids[3]), "the fifth deleted: {hits:#}");
    assert!(deleted.iter().all(|(id, notes)| *id != fifth && !marked(notes)), "{hits:#}");
    drop(daemon);
}
