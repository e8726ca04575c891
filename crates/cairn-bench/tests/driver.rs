//! Drives the bench against a throwaway engram-like server (std TcpListener, canned JSON) to
//! check the HTTP driver end to end: every route, keep-alive with server-side closes, chunked
//! bodies, `null` results, mode pass-through, the loopback rule, and `--spawn` (this test
//! binary re-runs itself as the server process).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn_bench::bench::{self, Config, PhaseResult, TargetSpec};
use serde_json::{Value, json};

#[derive(Default)]
struct Fake {
    observations: AtomicU64,
    next_id: AtomicI64,
    requests: AtomicU64,
    sessions: Mutex<HashSet<String>>,
    paths: Mutex<Vec<String>>,
}

fn start_fake() -> (u16, Arc<Fake>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = Arc::new(Fake::default());
    let f = fake.clone();
    std::thread::spawn(move || serve(&listener, &f));
    (port, fake)
}

fn serve(listener: &TcpListener, fake: &Arc<Fake>) {
    for stream in listener.incoming().flatten() {
        let fake = fake.clone();
        std::thread::spawn(move || {
            let _ = connection(stream, &fake);
        });
    }
}

fn connection(stream: TcpStream, fake: &Fake) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
        let mut length = 0;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            if h.trim().is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
            if name.eq_ignore_ascii_case("host") {
                assert!(value.trim().starts_with("127.0.0.1:"), "Host {value}");
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        fake.paths.lock().unwrap().push(format!("{method} {target}"));
        let n = fake.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let (status, json) = route(fake, &method, &target, &body);
        let text = json.to_string();
        let announce_close = n.is_multiple_of(41);
        let mut head = format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n");
        if announce_close {
            head.push_str("Connection: close\r\n");
        }
        if target.starts_with("/context") {
            // Chunked, in two chunks.
            head.push_str("Transfer-Encoding: chunked\r\n\r\n");
            let (a, b) = text.split_at(text.len() / 2);
            head.push_str(&format!("{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len()));
            out.write_all(head.as_bytes())?;
        } else {
            head.push_str(&format!("Content-Length: {}\r\n\r\n{text}", text.len()));
            out.write_all(head.as_bytes())?;
        }
        // Every 37th response the connection is dropped without notice (a stale keep-alive).
        if announce_close || n.is_multiple_of(37) {
            return Ok(());
        }
    }
}

fn query(target: &str, key: &str) -> Option<String> {
    let q = target.split_once('?')?.1;
    q.split('&').find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_owned))
}

fn route(fake: &Fake, method: &str, target: &str, body: &[u8]) -> (u16, Value) {
    let path = target.split('?').next().unwrap();
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match (method, path) {
        ("GET", "/health") => (200, json!({"status": "ok", "service": "fake-engram", "version": "0.1.0"})),
        ("GET", "/stats") => (200, json!({"total_observations": fake.observations.load(Ordering::Relaxed)})),
        ("POST", "/import") => {
            let sessions: HashSet<&str> =
                body["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
            let obs = body["observations"].as_array().unwrap();
            for o in obs {
                assert!(sessions.contains(o["session_id"].as_str().unwrap()), "session missing for {o}");
                let len = o["content"].as_str().unwrap().len();
                assert!((200..=2000).contains(&len));
            }
            fake.observations.fetch_add(obs.len() as u64, Ordering::Relaxed);
            (
                200,
                json!({"sessions_imported": sessions.len(), "observations_imported": obs.len(), "prompts_imported": 0}),
            )
        }
        ("POST", "/sessions") => {
            fake.sessions.lock().unwrap().insert(body["id"].as_str().unwrap().to_owned());
            (201, json!({"id": body["id"], "status": "created"}))
        }
        ("POST", "/observations") => {
            if !fake.sessions.lock().unwrap().contains(body["session_id"].as_str().unwrap_or("")) {
                return (404, json!({"error": "session not found"}));
            }
            fake.observations.fetch_add(1, Ordering::Relaxed);
            (201, json!({"id": fake.next_id.fetch_add(1, Ordering::Relaxed) + 1, "status": "saved"}))
        }
        ("GET", "/search") => match query(target, "q") {
            None => (400, json!({"error": "q is required"})),
            // engram answers an empty result with null.
            Some(_) if query(target, "project").is_none() => (200, Value::Null),
            Some(_) => (200, json!([{"id": 1, "rank": -1.5}, {"id": 2, "rank": -1.0}])),
        },
        ("GET", "/context") => (200, json!({"context": "## Memory from Previous Sessions\n".repeat(50)})),
        ("GET", "/observations/recent") => (200, json!([{"id": 1}, {"id": 2}, {"id": 3}])),
        ("GET", "/timeline") => match query(target, "observation_id") {
            Some(id) if id.parse::<i64>().is_ok() => (200, json!({"focus": {"id": id}, "before": [], "after": []})),
            _ => (400, json!({"error": "observation_id"})),
        },
        _ => (404, json!({"error": "not found"})),
    }
}

fn small_config() -> Config {
    Config {
        size: 2_000,
        batch: 500,
        saves: 60,
        conc_saves: 80,
        clients: 3,
        searches: 40,
        reads: 25,
        cold_starts: 2,
        mcp_spawns: 1,
        mcp_calls: 2,
        phase_secs: 30.0,
        load_secs: 60.0,
        ..Config::quick()
    }
}

fn phase<'a>(phases: &'a [PhaseResult], name: &str) -> &'a PhaseResult {
    phases.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no phase {name}"))
}

#[test]
fn drives_every_route_of_an_engram_like_server() {
    let (port, fake) = start_fake();
    let cfg = Config { mode: Some("hybrid".into()), ..small_config() };
    let report = bench::run(&cfg, &[TargetSpec::Url(format!("http://127.0.0.1:{port}"))], None).unwrap();
    let t = &report.targets[0];
    assert_eq!(t.service, "fake-engram 0.1.0");
    let p = &t.phases;
    assert!(phase(p, "cold-start").skipped.is_some());
    assert!(phase(p, "mcp-roundtrip").skipped.as_deref().unwrap().contains("cairn only"));

    let load = phase(p, "load");
    assert_eq!((load.ok, load.errors), (4, 0), "{load:?}");
    assert!(load.rate > 0.0 && load.unit == "mem/s");
    for (name, n) in
        [("save-seq", 60), ("save-conc", 80), ("search-project", 40), ("search-all", 40), ("search-question", 40)]
    {
        let r = phase(p, name);
        assert_eq!((r.ok, r.errors), (n, 0), "{r:?}");
        assert!(r.latency.p50 > 0.0 && r.latency.p99 >= r.latency.p50 && r.rate > 0.0, "{r:?}");
    }
    for name in ["context", "recent", "timeline"] {
        let r = phase(p, name);
        assert_eq!((r.ok, r.errors), (25, 0), "{r:?}");
    }
    assert_eq!(phase(p, "search-project").mean_hits, Some(2.0));
    assert_eq!(phase(p, "search-all").empty_share, Some(1.0));
    assert_eq!(phase(p, "recent").mean_hits, Some(3.0));
    assert_eq!(t.final_observations, Some(2_000 + 60 + 80));
    assert_eq!(fake.observations.load(Ordering::Relaxed), 2_140);

    let paths = fake.paths.lock().unwrap();
    let searches: Vec<&String> = paths.iter().filter(|p| p.starts_with("GET /search")).collect();
    assert_eq!(searches.len(), 120);
    assert!(searches.iter().all(|p| p.contains("mode=hybrid") && p.contains("limit=10")));
    // Timeline asks about ids the saves returned.
    assert!(paths.iter().filter(|p| p.starts_with("GET /timeline")).all(|p| {
        let id: i64 = p.rsplit('=').next().unwrap().parse().unwrap();
        (1..=140).contains(&id)
    }));
    let text = cairn_bench::report::render(&report);
    assert!(text.contains("search-question") && text.contains("mem/s"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["targets"][0]["phases"][1]["name"], "load");
}

#[test]
fn compare_alternates_and_reports_ratios() {
    let (a, _) = start_fake();
    let (b, _) = start_fake();
    let cfg = Config { phases: Some(vec!["save-seq".into(), "search-all".into()]), ..small_config() };
    let specs = [TargetSpec::Url(format!("http://127.0.0.1:{a}")), TargetSpec::Url(format!("http://localhost:{b}"))];
    let report = bench::run(&cfg, &specs, None).unwrap();
    assert_eq!(report.targets.len(), 2);
    let names: Vec<&str> = report.ratios.iter().map(|r| r.phase.as_str()).collect();
    assert_eq!(names, ["save-seq", "search-all"]);
    assert!(report.ratios.iter().all(|r| r.p50.is_some_and(|x| x > 0.0)));
    assert!(cairn_bench::report::render(&report).contains("B/A ratios"));
}

#[test]
fn refuses_non_loopback_targets() {
    let err = bench::run(&small_config(), &[TargetSpec::Url("http://192.168.1.5:7437".into())], None).unwrap_err();
    assert!(err.to_string().contains("non-loopback"), "{err}");
}

#[test]
fn spawns_a_server_measures_it_and_cleans_up() {
    let exe = std::env::current_exe().unwrap();
    let cmd = format!("\"{}\" fake_server_process --exact --ignored --nocapture", exe.display());
    let cfg =
        Config { phases: Some(vec!["cold-start".into(), "load".into(), "search-project".into()]), ..small_config() };
    let report = bench::run(&cfg, &[TargetSpec::Spawn(cmd)], None).unwrap();
    let t = &report.targets[0];
    let cold = phase(&t.phases, "cold-start");
    assert_eq!((cold.ok, cold.errors), (2, 0), "{cold:?}");
    assert!(t.cold_start_ms.is_some_and(|ms| ms > 0.0));
    assert!(t.peak_rss_bytes.is_some_and(|b| b > 0));
    assert!(t.disk_bytes.is_some_and(|b| b >= 1000), "{:?}", t.disk_bytes);
    assert_eq!(phase(&t.phases, "load").errors, 0);
    assert_eq!(t.final_observations, Some(2_000));
    // Every temp dir of this process is gone (servers killed, dirs removed).
    let prefix = format!("cairn-bench-{}-", std::process::id());
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The server process of `spawns_a_server_measures_it_and_cleans_up` (does nothing unless
/// started by the bench, which sets CAIRN_PORT and CAIRN_DATA_DIR).
#[test]
#[ignore = "run by the spawn test as a server process"]
fn fake_server_process() {
    let (Ok(port), Ok(dir)) = (std::env::var("CAIRN_PORT"), std::env::var("CAIRN_DATA_DIR")) else { return };
    assert_eq!(std::env::var("ENGRAM_DATA_DIR").as_deref(), Ok(dir.as_str()));
    assert_eq!(std::env::var("CAIRN_AUTOSTART").as_deref(), Ok("never"));
    std::fs::write(std::path::Path::new(&dir).join("store.db"), [0u8; 1000]).unwrap();
    let listener = TcpListener::bind(format!("127.0.0.1:{port}")).unwrap();
    serve(&listener, &Arc::new(Fake::default()));
}
