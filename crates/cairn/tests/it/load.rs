//! Load proof: many agents on one daemon for a sustained period — 8 HTTP clients on
//! keep-alive connections (searches, reads, context, topic revisions, saves and hard deletes)
//! and 3 `cairn mcp` processes (search, save, context) — with zero errors, and the daemon's
//! memory flat: RSS sampled every second must not climb from the first third of the run to the
//! last (see [`assert_flat`] for the bound). The live set of memories is kept constant
//! (revisions in place; every new memory is erased again later), so a growing RSS means a
//! leak, not more data.
//!
//! Latency percentiles per operation are printed, never asserted. CAIRN_LOAD_SECS sets the
//! measured period (default 30; a 3 s warm-up comes first).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Daemon, McpChild, Rng, assert_rss_flat, http, pick, vm_rss_kb};

const WARM_UP: Duration = Duration::from_secs(3);
const PRELOAD: usize = 2000;

fn measured() -> Duration {
    Duration::from_secs(std::env::var("CAIRN_LOAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30))
}

/// Latencies per operation, and failures.
#[derive(Default)]
struct Tally {
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    errors: Vec<String>,
}

impl Tally {
    fn record(&mut self, op: &'static str, took: Duration, result: Result<(), String>) {
        self.latencies.entry(op).or_default().push(took);
        if let Err(e) = result {
            self.errors.push(format!("{op}: {e}"));
        }
    }

    fn merge(&mut self, other: Tally) {
        for (op, mut l) in other.latencies {
            self.latencies.entry(op).or_default().append(&mut l);
        }
        self.errors.extend(other.errors);
    }
}

#[test]
fn many_clients_for_a_while_no_errors_and_flat_memory() {
    let seed = Rng::seed_from_env("CAIRN_LOAD_SEED");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let work = tmp.path().join("load");
    std::fs::create_dir_all(&work).unwrap();
    let daemon = Daemon::start(&data);
    preload(daemon.addr, &mut Rng::new(seed));

    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..8u64 {
        let (addr, stop, measuring) = (daemon.addr, Arc::clone(&stop), Arc::clone(&measuring));
        threads.push(std::thread::spawn(move || http_client(addr, w, seed ^ w, &stop, &measuring)));
    }
    for m in 0..3u64 {
        let (data, work, stop, measuring) = (data.clone(), work.clone(), Arc::clone(&stop), Arc::clone(&measuring));
        threads.push(std::thread::spawn(move || mcp_client(&data, &work, m, seed ^ (100 + m), &stop, &measuring)));
    }

    std::thread::sleep(WARM_UP);
    measuring.store(true, Ordering::Relaxed);
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampler = {
        let (samples, stop, pid) = (Arc::clone(&samples), Arc::clone(&stop), daemon.pid());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(kb) = vm_rss_kb(pid) {
                    samples.lock().unwrap().push(kb);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    let started = Instant::now();
    std::thread::sleep(measured());
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let mut tally = Tally::default();
    for t in threads {
        tally.merge(t.join().expect("client thread"));
    }
    sampler.join().unwrap();
    let (status, health) = http(daemon.addr, "GET", "/health", None);
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")), "{health}");
    drop(daemon);

    report(&tally, elapsed);
    assert!(
        tally.errors.is_empty(),
        "{} requests failed (seed {seed}), first: {:?}",
        tally.errors.len(),
        &tally.errors[..tally.errors.len().min(5)]
    );
    let samples = samples.lock().unwrap().clone();
    assert_rss_flat("load", &samples);
}

/// 2000 memories in one import, so searches and context work on a realistic index.
fn preload(addr: SocketAddr, rng: &mut Rng) {
    let observations: Vec<Value> = (0..PRELOAD)
        .map(|i| {
            json!({"session_id": "load-preload", "project": "load", "type": "discovery",
                "title": format!("{} {} note {i}", pick(rng), pick(rng)),
                "content": (0..30).map(|_| pick(rng)).collect::<Vec<_>>().join(" ")})
        })
        .collect();
    let (status, body) = http(addr, "POST", "/import", Some(&json!({"observations": observations})));
    assert_eq!(status, 200, "{body}");
}

fn http_client(addr: SocketAddr, w: u64, seed: u64, stop: &AtomicBool, measuring: &AtomicBool) -> Tally {
    let mut rng = Rng::new(seed);
    let mut conn = KeepAlive::connect(addr);
    let mut tally = Tally::default();
    let mut mine: VecDeque<i64> = VecDeque::new();
    let session = format!("load-http-{w}");
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let roll = rng.range(0, 100);
        let started = Instant::now();
        // A save followed by an erase reports the save's own time.
        let mut save_took = None;
        let (op, result): (&'static str, Result<(), String>) = if roll < 40 {
            let path = format!("/search?q={}+{}&project=load&limit=10", pick(&mut rng), pick(&mut rng));
            ("http search", conn.request("GET", &path, None).and_then(|r| expect(r, 200)))
        } else if roll < 55 {
            let body = json!({"session_id": session, "project": "load", "title": format!("topic {w} {}", i % 40),
                "content": format!("{} {} revised {i}", pick(&mut rng), pick(&mut rng)),
                "topic_key": format!("load/w{w}-t{}", i % 40), "type": "decision"});
            ("http save (revise)", conn.request("POST", "/observations", Some(&body)).and_then(|r| expect(r, 201)))
        } else if roll < 70 {
            let body = json!({"session_id": session, "project": "load", "type": "bugfix",
                "title": format!("{} fixed {w}-{i}", pick(&mut rng)),
                "content": format!("{} {} {} new {w}-{i}", pick(&mut rng), pick(&mut rng), pick(&mut rng))});
            let result = conn.request("POST", "/observations", Some(&body)).and_then(|(status, value)| {
                mine.extend(value["id"].as_i64());
                expect((status, value), 201)
            });
            if mine.len() > 20 {
                // Keep the live set constant: every new memory is erased again later.
                let took = started.elapsed();
                let id = mine.pop_front().unwrap();
                let erased = Instant::now();
                let path = format!("/observations/{id}?hard=true");
                let deleted = conn.request("DELETE", &path, None).and_then(|r| expect(r, 200));
                if measuring.load(Ordering::Relaxed) {
                    tally.record("http delete (hard)", erased.elapsed(), deleted);
                } else if let Err(e) = deleted {
                    tally.errors.push(format!("http delete (warm-up): {e}"));
                }
                save_took = Some(took);
                ("http save (new)", result)
            } else {
                ("http save (new)", result)
            }
        } else if roll < 85 {
            let id = mine.back().copied().unwrap_or(1 + rng.range(0, PRELOAD as u64) as i64);
            ("http get", conn.request("GET", &format!("/observations/{id}"), None).and_then(|r| expect(r, 200)))
        } else {
            ("http context", conn.request("GET", "/context?project=load", None).and_then(|r| expect(r, 200)))
        };
        if measuring.load(Ordering::Relaxed) {
            tally.record(op, save_took.unwrap_or_else(|| started.elapsed()), result);
        } else if let Err(e) = result {
            tally.errors.push(format!("{op} (warm-up): {e}"));
        }
        i += 1;
    }
    tally
}

fn mcp_client(
    data: &std::path::Path,
    work: &std::path::Path,
    m: u64,
    seed: u64,
    stop: &AtomicBool,
    measuring: &AtomicBool,
) -> Tally {
    let mut rng = Rng::new(seed);
    let mut mcp = McpChild::spawn(data, work, &[("CAIRN_PROJECT", "load")]);
    let mut tally = Tally::default();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let roll = rng.range(0, 100);
        let started = Instant::now();
        let (op, result) = if roll < 60 {
            let query = format!("{} {} {}", pick(&mut rng), pick(&mut rng), pick(&mut rng));
            ("mcp mem_search", mcp.call("mem_search", json!({"query": query})))
        } else if roll < 85 {
            let args = json!({"title": format!("mcp {m} topic {}", i % 30), "type": "pattern",
                "content": format!("{} {} from mcp {m} call {i}", pick(&mut rng), pick(&mut rng)),
                "topic_key": format!("load/mcp{m}-t{}", i % 30)});
            ("mcp mem_save (revise)", mcp.call("mem_save", args))
        } else {
            ("mcp mem_context", mcp.call("mem_context", json!({})))
        };
        let result = result.map(|_| ());
        if measuring.load(Ordering::Relaxed) {
            tally.record(op, started.elapsed(), result);
        } else if let Err(e) = result {
            tally.errors.push(format!("{op} (warm-up): {e}"));
        }
        i += 1;
    }
    tally
}

fn expect((status, value): (u16, Value), wanted: u16) -> Result<(), String> {
    if status == wanted { Ok(()) } else { Err(format!("{status}: {value}")) }
}

/// An HTTP/1.1 client on one keep-alive connection (as a plugin's `fetch` would hold).
struct KeepAlive(cairn_http::Client);

impl KeepAlive {
    fn connect(addr: SocketAddr) -> KeepAlive {
        KeepAlive(cairn_http::Client::new(cairn_http::BaseUrl::from_addr(addr), Duration::from_secs(30)))
    }

    fn request(&mut self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        let body = body.map(Value::to_string);
        let answer = self.0.send(method, path, body.as_deref().map(str::as_bytes), &[]).map_err(|e| e.to_string())?;
        Ok((answer.status, answer.json().unwrap_or(Value::Null)))
    }
}

fn report(tally: &Tally, elapsed: Duration) {
    let total: usize = tally.latencies.values().map(Vec::len).sum();
    eprintln!(
        "load: {total} requests in {:.1?} ({:.0}/s), {} errors",
        elapsed,
        total as f64 / elapsed.as_secs_f64(),
        tally.errors.len()
    );
    eprintln!("load: {:<24} {:>7} {:>9} {:>9} {:>9}", "operation", "count", "p50 ms", "p95 ms", "p99 ms");
    for (op, latencies) in &tally.latencies {
        let mut sorted = latencies.clone();
        sorted.sort_unstable();
        let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)].as_secs_f64() * 1000.0;
        eprintln!("load: {op:<24} {:>7} {:>9.2} {:>9.2} {:>9.2}", sorted.len(), at(0.5), at(0.95), at(0.99));
    }
}
