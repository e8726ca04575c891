//! The HTTP API over real TCP: every route's success and failure paths, engram's quirks fixed,
//! hostile and malformed input (the store must not change), security checks, the OpenAPI
//! document against real responses, concurrency and graceful shutdown.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Request};
use cairn_client::DaemonClient;
use cairn_core::ErrorCode;
use cairn_core::ops::{DeleteRequest, GetRequest, Op, StatsRequest};
use cairn_engine::Engine;
use cairn_server::http::{AppState, HttpConfig, serve};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Small limits so oversized bodies stay small enough to fit in socket buffers.
const MAX_BODY: usize = 8 * 1024;
const IMPORT_MAX_BODY: usize = 64 * 1024;
const TIMEOUT: Duration = Duration::from_secs(20);

struct Server {
    addr: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
    dir: tempfile::TempDir,
    /// The daemon's engine (a test hands it a model with `set_llm`).
    engine: Arc<Engine>,
}

struct Reply {
    status: u16,
    headers: HeaderMap,
    bytes: Bytes,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("{} is not JSON ({e}): {:?}", self.status, String::from_utf8_lossy(&self.bytes)))
    }

    /// The error code, after checking the body has the one error shape.
    fn code(&self) -> String {
        let body = self.json();
        assert_error_shape(&body);
        body["code"].as_str().unwrap().to_owned()
    }

    fn expect(self, status: u16) -> Value {
        assert_eq!(self.status, status, "body: {}", String::from_utf8_lossy(&self.bytes));
        self.json()
    }

    fn expect_error(self, status: u16, code: &str) -> Value {
        assert_eq!(
            (self.status, self.code().as_str()),
            (status, code),
            "body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        self.json()
    }
}

fn assert_error_shape(body: &Value) {
    let keys: BTreeSet<&str> = body.as_object().expect("error body is an object").keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["error", "code", "detail"]), "{body}");
    let inner: BTreeSet<&str> = body["error"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(inner, BTreeSet::from(["code", "message", "hint"]), "{body}");
    assert_eq!(body["code"], body["error"]["code"]);
    assert_eq!(body["detail"], body["error"]["message"]);
    let code = body["code"].as_str().unwrap();
    assert!(ErrorCode::from_name(code).is_some(), "{code} is not in the error table");
}

async fn start() -> Server {
    start_with(|_| {}).await
}

async fn start_with(tweak: impl FnOnce(&mut HttpConfig)) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(&dir.path().join("cairn.db")).unwrap();
    let mut config = HttpConfig {
        data_dir: Some(dir.path().to_owned()),
        version: "9.9.9-test".into(),
        max_body_bytes: MAX_BODY,
        import_max_body_bytes: IMPORT_MAX_BODY,
        ..HttpConfig::default()
    };
    tweak(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let state = AppState { engine: Arc::clone(&engine), config: Arc::new(config) };
    let task = tokio::spawn(serve(listener, state, async {
        let _ = stopped.await;
    }));
    let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    Server { addr, client, stop: Some(stop), task: Some(task), dir, engine }
}

impl Server {
    async fn call(&self, method: &str, path: &str, body: Option<Vec<u8>>, headers: &[(&str, &str)]) -> Reply {
        let mut req = Request::builder().method(method).uri(format!("http://{}{path}", self.addr));
        if body.is_some() && !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
            req = req.header("content-type", "application/json");
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default()))).unwrap();
        let res = tokio::time::timeout(TIMEOUT, self.client.request(req)).await.expect("timed out").expect("request");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        Reply { status, headers, bytes }
    }

    async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, None, &[]).await
    }

    async fn delete(&self, path: &str) -> Reply {
        self.call("DELETE", path, None, &[]).await
    }

    async fn send(&self, method: &str, path: &str, body: &Value) -> Reply {
        self.call(method, path, Some(serde_json::to_vec(body).unwrap()), &[]).await
    }

    async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send("POST", path, body).await
    }

    async fn post_raw(&self, path: &str, body: &[u8]) -> Reply {
        self.call("POST", path, Some(body.to_vec()), &[]).await
    }

    /// Everything stored (the export without its timestamp): equal before and after a refused
    /// request means nothing changed.
    async fn store_state(&self) -> Value {
        let mut export = self.get("/export").await.expect(200);
        export.as_object_mut().unwrap().remove("exported_at");
        export
    }

    async fn save(&self, body: Value) -> Value {
        self.post("/observations", &body).await.expect(201)
    }

    /// A raw HTTP/1.1 exchange (for what a well-behaved client cannot send).
    async fn raw(&self, request: &[u8]) -> (u16, Value) {
        let mut stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut out)).await.expect("timed out").unwrap();
        let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
        let head = String::from_utf8_lossy(&out[..split]).to_string();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, serde_json::from_slice(&out[split + 4..]).unwrap_or(Value::Null))
    }

    async fn shutdown(mut self) -> std::io::Result<()> {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(TIMEOUT, self.task.take().unwrap()).await.expect("serve did not return").unwrap()
    }
}

/// Replace what differs between runs (timestamps, UUIDs, temp paths) for snapshots.
fn scrub(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let volatile = k.ends_with("_at")
                        || matches!(k.as_str(), "sync_id" | "judgment_id" | "source_id" | "target_id" | "review_after");
                    let scrubbed = if volatile && v.is_string() {
                        json!(format!("[{k}]"))
                    } else if matches!(k.as_str(), "data_dir" | "db_path") && v.is_string() {
                        json!("[path]")
                    } else {
                        scrub(v)
                    };
                    (k.clone(), scrubbed)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(scrub).collect()),
        other => other.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// health, stats, projects, doctor, sync

#[tokio::test]
async fn a_request_meant_for_another_data_dir_is_refused_and_changes_nothing() {
    use cairn_client::daemon::{DATA_DIR_HEADER, data_dir_header_value};
    let s = start().await;
    let before = s.store_state().await;
    let save = serde_json::to_vec(&json!({"op": "save", "args": {"title": "t", "content": "c"}})).unwrap();
    for other in [s.dir.path().join("elsewhere"), std::path::PathBuf::from("/tmp/ötro dír/%2F"), "".into()] {
        let header = data_dir_header_value(&other);
        let reply = s.call("POST", "/v1/op", Some(save.clone()), &[(DATA_DIR_HEADER, &header)]).await;
        let body = reply.expect_error(409, "daemon_mismatch");
        assert!(body["error"]["message"].as_str().unwrap().contains("this daemon serves"), "{body}");
    }
    assert_eq!(s.store_state().await, before, "a refused request stored nothing");
    // The daemon's own data dir, as given or through a symlink, is served.
    let own = data_dir_header_value(s.dir.path());
    s.call("POST", "/v1/op", Some(save.clone()), &[(DATA_DIR_HEADER, &own)]).await.expect(200);
    #[cfg(unix)]
    {
        let link = tempfile::tempdir().unwrap();
        let alias = link.path().join("alias");
        std::os::unix::fs::symlink(s.dir.path(), &alias).unwrap();
        let aliased = data_dir_header_value(&alias);
        s.call("POST", "/v1/op", Some(save), &[(DATA_DIR_HEADER, &aliased)]).await.expect(200);
    }
}

#[test]
fn the_data_dir_header_round_trips_any_path() {
    use cairn_client::daemon::{data_dir_from_header, data_dir_header_value};
    for path in ["/home/ana/.local/share/cairn", "/tmp/ötro dír/%2F\\x", "relative/dir", ""] {
        let value = data_dir_header_value(std::path::Path::new(path));
        assert!(value.bytes().all(|b| b.is_ascii_graphic()), "{value}");
        assert_eq!(data_dir_from_header(&value), std::path::PathBuf::from(path));
    }
}

#[tokio::test]
async fn health_names_the_data_dir_and_version() {
    let s = start().await;
    let health = s.get("/health").await.expect(200);
    assert_eq!(health["data_dir"], s.dir.path().display().to_string());
    assert_eq!((health["status"].as_str(), health["store"].as_str()), (Some("ok"), Some("ok")));
    assert_eq!(health["schema_version"], cairn_core::store::SCHEMA_VERSION);
    let mut stable = scrub(&health);
    stable["schema_version"] = json!("[schema_version]");
    // Built in the background at open: either state is right at this moment.
    assert!(matches!(health["search_index"].as_str(), Some("ready" | "building")), "{health}");
    stable["search_index"] = json!("[ready|building]");
    // Every worker of the engine, none dead; the index build may or may not be done yet.
    let workers = health["workers"].as_array().expect("workers");
    for w in workers {
        let expected: &[&str] = if w["name"] == "cairn-index-build" { &["running", "done"] } else { &["running"] };
        assert!(expected.contains(&w["state"].as_str().unwrap_or_default()), "{w}");
    }
    let mut names: Vec<&str> = workers.iter().filter_map(|w| w["name"].as_str()).collect();
    names.sort_unstable();
    stable["workers"] = json!(names);
    insta::assert_json_snapshot!("health", stable);
    // The daemon client accepts it as the daemon of its data dir.
    let client = DaemonClient::new(s.addr, None);
    let probed = tokio::task::spawn_blocking(move || client.health()).await.unwrap().unwrap();
    assert_eq!(probed["service"], "cairn");
}

#[tokio::test]
async fn stats_projects_doctor_and_sync() {
    let s = start().await;
    let empty = s.get("/stats").await.expect(200);
    assert_eq!((empty["total_observations"].as_i64(), empty["projects"].clone()), (Some(0), json!([])));
    assert_eq!(s.get("/projects").await.expect(200), json!({"projects": [], "count": 0}));
    s.save(json!({"title": "a", "content": "b", "project": "alpha"})).await;
    s.save(json!({"title": "c", "content": "d", "project": "beta"})).await;
    let projects = s.get("/projects").await.expect(200);
    assert_eq!(projects["count"], 2);
    assert_eq!(projects["projects"][0]["observations"], 1);
    let doctor = s.get("/doctor").await.expect(200);
    assert!(doctor["checks"].as_array().unwrap().iter().any(|c| c["id"] == "data_dir"), "{doctor}");
    let sync = s.get("/sync/status").await.expect(200);
    assert_eq!((&sync["enabled"], &sync["projects"], &sync["targets"]), (&json!(false), &json!([]), &json!([])));
    // A session-start import where there is nothing to import starts nothing; bad bodies get a code.
    let repo = tempfile::tempdir().unwrap();
    let started = s.post("/sync/import", &json!({"directory": repo.path()})).await.expect(200);
    assert_eq!(started["started"], json!(false));
    s.post("/sync/import", &json!({"dir": 3})).await.expect(400);
    // The time limit is a whole number of milliseconds up to the cap, `250.0` as well as `250`.
    let dir = repo.path();
    s.post("/sync/import", &json!({"directory": dir, "time_limit_ms": 250.0})).await.expect(200);
    for bad in [json!(8001), json!(9_223_372_036_854_775_808_u64), json!(-1), json!(2.5)] {
        s.post("/sync/import", &json!({"directory": dir, "time_limit_ms": bad}))
            .await
            .expect_error(400, "invalid_argument");
    }
    // No hub set: a round now is refused with a stable code, and the status has no remote.
    s.post("/sync/remote", &json!({})).await.expect_error(409, "remote_not_configured");
    assert_eq!(sync["remote"], json!(null));
}

#[tokio::test]
async fn current_project_is_detected_and_never_an_error_status() {
    let s = start().await;
    let repo = s.dir.path().join("My_Tool");
    std::fs::create_dir_all(repo.join(".cairn")).unwrap();
    std::fs::write(repo.join(".cairn/config.json"), r#"{"project_name": "Real-Name"}"#).unwrap();
    let found = s.get(&format!("/project/current?cwd={}", repo.display())).await.expect(200);
    assert_eq!((found["project"].as_str(), found["project_source"].as_str()), (Some("real-name"), Some("config")));
    // Candidates are listed only when the directory is ambiguous (engram §11), never the store's projects.
    s.save(json!({"title": "t", "content": "c", "project": "elsewhere"})).await;
    assert_eq!(
        s.get(&format!("/project/current?cwd={}", repo.display())).await.expect(200)["available_projects"],
        json!([])
    );
    let multi = s.dir.path().join("multi");
    for sub in ["api/.git", "web/.git"] {
        std::fs::create_dir_all(multi.join(sub)).unwrap();
    }
    let ambiguous = s.get(&format!("/project/current?cwd={}", multi.display())).await.expect(200);
    assert_eq!((ambiguous["project"].as_str(), ambiguous["project_source"].as_str()), (Some(""), Some("ambiguous")));
    assert_eq!(ambiguous["available_projects"], json!(["api", "web"]));
    assert_eq!(ambiguous["error_code"], "ambiguous_project");

    let broken = s.dir.path().join("broken");
    std::fs::create_dir_all(broken.join(".cairn")).unwrap();
    std::fs::write(broken.join(".cairn/config.json"), "{not json").unwrap();
    let failed = s.get(&format!("/project/current?cwd={}", broken.display())).await.expect(200);
    assert_eq!((failed["project"].as_str(), failed["project_source"].as_str()), (Some(""), Some("error")));
    assert!(failed["error_hint"].as_str().unwrap().contains("not valid JSON"), "{failed}");
    assert_eq!(failed["error_code"], "invalid_project_config");
    // Without cwd: the daemon's own directory.
    assert!(s.get("/project/current").await.expect(200)["project"].is_string());
}

// ---------------------------------------------------------------------------------------------
// sessions and prompts

#[tokio::test]
async fn session_lifecycle() {
    let s = start().await;
    let body = json!({"id": "s-1", "project": "Cairn", "directory": "/w", "ownership_mode": "project_owned"});
    let created = s.post("/sessions", &body).await.expect(201);
    assert_eq!((created["id"].as_str(), created["status"].as_str()), (Some("s-1"), Some("created")));
    insta::assert_json_snapshot!("session_created", scrub(&created));
    // Idempotent, fills blanks only.
    let again = s.post("/sessions", &json!({"id": "s-1", "project": "other"})).await.expect(201);
    assert_eq!(again["project"], "cairn");
    assert_eq!(s.get("/sessions/s-1").await.expect(200)["directory"], "/w");
    let recent = s.get("/sessions/recent?project=cairn&limit=5").await.expect(200);
    assert_eq!(recent[0]["id"], "s-1");
    assert_eq!(recent[0]["observation_count"], 0);
    assert_eq!(s.get("/sessions/recent?project=nobody").await.expect(200), json!([]));

    // End: empty body and `{}` both fine; a summary is redacted.
    let ended = s.call("POST", "/sessions/s-1/end", None, &[]).await.expect(200);
    assert_eq!(ended["status"], "completed");
    let ended = s.post("/sessions/s-1/end", &json!({"summary": "did it <private>pw</private>"})).await.expect(200);
    assert_eq!(ended["summary"], "did it [REDACTED]");
    // An unknown id: engram's answer (200, `{id, status}`), and nothing is created.
    let ghost = s.post("/sessions/ghost/end", &json!({})).await.expect(200);
    assert_eq!(ghost, json!({"id": "ghost", "status": "completed"}));
    s.post_raw("/sessions/s-1/end", b"{oops").await.expect_error(400, "invalid_json");
    // Whitespace is no body and no JSON (schemathesis seed 2659010853 sent a tab to /history/ingest).
    for body in [&b"\t"[..], b" ", b"\r\n"] {
        s.post_raw("/sessions/s-1/end", body).await.expect_error(400, "invalid_json");
        s.post_raw("/history/ingest", body).await.expect_error(400, "invalid_json");
    }
    // serde takes a struct as an array of its fields: only an object (or nothing, or null) is a body.
    for body in [&b"[null]"[..], b"[\"sum\"]", b"3", b"\"summary\""] {
        s.post_raw("/sessions/s-1/end", body).await.expect_error(400, "invalid_argument");
    }
    assert_eq!(s.post_raw("/sessions/s-1/end", b"null").await.expect(200)["status"], "completed");

    s.get("/sessions/ghost").await.expect_error(404, "session_not_found");
    s.delete("/sessions/ghost").await.expect_error(404, "session_not_found");
    s.save(json!({"title": "t", "content": "c", "session_id": "s-1"})).await;
    s.delete("/sessions/s-1").await.expect_error(409, "session_has_observations");
    s.post("/sessions", &json!({"id": "empty"})).await.expect(201);
    assert_eq!(s.delete("/sessions/empty").await.expect(200), json!({"id": "empty", "status": "deleted"}));
    s.post("/sessions", &json!({"id": ""})).await.expect_error(400, "empty_field");
    s.post("/sessions", &json!({"project": "p"})).await.expect_error(400, "invalid_argument");
}

#[tokio::test]
async fn prompts_round_trip() {
    let s = start().await;
    let saved = s.post("/prompts", &json!({"content": "fix the login bug", "project": "app"})).await.expect(201);
    assert_eq!((saved["status"].as_str(), saved["session_id"].as_str()), (Some("saved"), Some("manual-save-app")));
    let id = saved["id"].as_i64().unwrap();
    assert_eq!(s.get("/prompts/recent?project=app").await.expect(200)[0]["id"], id);
    assert_eq!(s.get("/prompts/search?q=login&project=app").await.expect(200)[0]["id"], id);
    assert_eq!(s.get("/prompts/search?q=nothing").await.expect(200), json!([]));
    s.get("/prompts/search").await.expect_error(400, "empty_field");
    s.post("/prompts", &json!({"content": "  "})).await.expect_error(400, "empty_field");
    assert_eq!(s.delete(&format!("/prompts/{id}")).await.expect(200), json!({"id": id, "status": "deleted"}));
    s.delete(&format!("/prompts/{id}")).await.expect_error(404, "prompt_not_found");
    s.delete("/prompts/x1").await.expect_error(400, "invalid_argument");
}

// ---------------------------------------------------------------------------------------------
// memories

#[tokio::test]
async fn save_get_update_pin_delete() {
    let s = start().await;
    let body = json!({"session_id": "s-1", "type": "decision", "title": "Use SQLite WAL",
        "content": "Readers never block the writer", "project": "cairn", "tool_name": "mem_save"});
    let saved = s.save(body).await;
    assert_eq!(
        (saved["id"].as_i64(), saved["status"].as_str(), saved["action"].as_str()),
        (Some(1), Some("saved"), Some("created"))
    );
    insta::assert_json_snapshot!("observation_saved", scrub(&saved));

    let got = s.get("/observations/1").await.expect(200);
    assert_eq!((got["title"].as_str(), got["type"].as_str()), (Some("Use SQLite WAL"), Some("decision")));
    insta::assert_json_snapshot!("observation_got", scrub(&got));

    let patched = s.send("PATCH", "/observations/1", &json!({"title": "Use SQLite in WAL mode"})).await.expect(200);
    assert_eq!(
        (patched["title"].as_str(), patched["revision_count"].as_i64()),
        (Some("Use SQLite in WAL mode"), Some(2))
    );
    let with_revisions = s.get("/observations/1?revisions=true").await.expect(200);
    assert_eq!(with_revisions["revisions"][0]["title"], "Use SQLite WAL");

    assert_eq!(s.post("/observations/1/pin", &json!({})).await.expect(200)["pinned"], true);
    assert_eq!(s.call("POST", "/observations/1/unpin", None, &[]).await.expect(200)["pinned"], false);
    s.post("/observations/9/pin", &json!({})).await.expect_error(404, "observation_not_found");

    // The trash: a soft delete waits there until restored.
    // A live memory is answered as it is (a retried restore succeeds).
    assert_eq!(s.post("/observations/1/restore", &json!({})).await.expect(200)["id"], 1);
    s.call("DELETE", "/observations/1", None, &[]).await.expect(200);
    assert_eq!(s.get("/observations?deleted=true").await.expect(200)[0]["id"], 1);
    let restored = s.post("/observations/1/restore", &json!({})).await.expect(200);
    assert_eq!((restored["title"].as_str(), restored["deleted_at"].as_str()), (Some("Use SQLite in WAL mode"), None));
    assert_eq!(s.get("/observations?deleted=true").await.expect(200), json!([]));

    let list = s.get("/observations?project=cairn&sort=created_at:desc").await.expect(200);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(s.get("/observations/recent?project=cairn&scope=project").await.expect(200)[0]["id"], 1);
    // Empty lists are [] (engram: null).
    assert_eq!(s.get("/observations?project=nobody").await.expect(200), json!([]));
    assert_eq!(s.get("/observations/recent?scope=personal").await.expect(200), json!([]));

    let deleted = s.delete("/observations/1").await.expect(200);
    assert_eq!(deleted, json!({"id": 1, "status": "deleted", "hard_delete": false}));
    s.get("/observations/1").await.expect_error(404, "observation_not_found");
    s.delete("/observations/1").await.expect_error(404, "observation_not_found");
    assert_eq!(s.delete("/observations/1?hard=true").await.expect(200)["hard_delete"], true);
    s.delete("/observations/1?hard=true").await.expect_error(404, "observation_not_found");
}

#[tokio::test]
async fn topic_saves_revise_and_repeats_count() {
    let s = start().await;
    let first = s
        .save(json!({"title": "Auth model", "content": "JWT", "topic_key": "architecture/auth", "project": "p"}))
        .await;
    let second = s
        .save(json!({"title": "Auth model", "content": "Sessions", "topic_key": "architecture/auth", "project": "p"}))
        .await;
    assert_eq!((second["id"].clone(), second["action"].as_str()), (first["id"].clone(), Some("revised")));
    let third = s
        .save(json!({"title": "Auth model", "content": "Sessions", "topic_key": "architecture/auth", "project": "p"}))
        .await;
    assert_eq!((third["action"].as_str(), third["duplicate_count"].as_i64()), (Some("duplicate"), Some(2)));
    let private = s.save(json!({"title": "Key", "content": "token <private>abc</private>", "project": "p"})).await;
    assert_eq!(private["redacted"], true);
    assert_eq!(s.get(&format!("/observations/{}", private["id"])).await.expect(200)["content"], "token [REDACTED]");
}

#[tokio::test]
async fn update_distinguishes_bad_input_from_unknown_ids() {
    let s = start().await;
    s.save(json!({"title": "t", "content": "c"})).await;
    let before = s.store_state().await;
    s.send("PATCH", "/observations/1", &json!({})).await.expect_error(400, "invalid_argument");
    s.call("PATCH", "/observations/1", Some(b"{\"title\": ".to_vec()), &[]).await.expect_error(400, "invalid_json");
    s.send("PATCH", "/observations/1", &json!({"title": 5})).await.expect_error(400, "invalid_argument");
    s.send("PATCH", "/observations/1", &json!({"title": " "})).await.expect_error(400, "empty_field");
    s.send("PATCH", "/observations/abc", &json!({"title": "x"})).await.expect_error(400, "invalid_argument");
    s.send("PATCH", "/observations/99", &json!({"title": "x"})).await.expect_error(404, "observation_not_found");
    assert_eq!(s.store_state().await, before);
}

#[tokio::test]
async fn passive_capture_saves_learnings_once() {
    let s = start().await;
    let reply = "Done.\n\n## Key Learnings:\n1. Always run cargo fmt before pushing to CI\n\
                 2. The integration tests need Postgres on 5433\n";
    let body = json!({"session_id": "s-9", "content": reply, "project": "p", "source": "subagent-stop"});
    let first = s.post("/observations/passive", &body).await.expect(200);
    assert_eq!((first["extracted"].as_i64(), first["saved"].as_i64()), (Some(2), Some(2)));
    let again = s.post("/observations/passive", &body).await.expect(200);
    assert_eq!((again["saved"].as_i64(), again["duplicates"].as_i64()), (Some(0), Some(2)));
    s.post("/observations/passive", &json!({"session_id": "s-9"})).await.expect_error(400, "invalid_argument");
    s.post("/observations/passive", &json!({"content": ""})).await.expect_error(400, "empty_field");
}

#[tokio::test]
async fn search_answers_an_array_with_ranks_and_notices() {
    let s = start().await;
    s.save(json!({"title": "Redis pool exhausted", "content": "raised the pool size to 50", "project": "alpha",
        "type": "bugfix"}))
        .await;
    s.save(json!({"title": "Redis eviction policy", "content": "allkeys-lru", "project": "beta"})).await;
    s.save(json!({"title": "Auth", "content": "JWT", "project": "alpha", "topic_key": "architecture/auth"})).await;

    let hits = s.get("/search?q=how+did+we+fix+the+redis+pool&project=alpha").await.expect(200);
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0]["rank"].as_f64().unwrap() < 0.0 && hits[0]["score"].as_f64().unwrap() > 0.0);
    assert_eq!((hits[0]["matched"].as_str(), hits[0]["annotations"].clone()), (Some("lexical"), json!([])));
    assert!(hits[0]["snippet"].as_str().unwrap().contains("**"));

    let topic = s.get("/search?q=architecture/auth").await.expect(200);
    assert_eq!((topic[0]["rank"].as_f64(), topic[0]["matched"].as_str()), (Some(-1000.0), Some("topic_key")));

    // Scoped search finds nothing here but says where it would: empty array plus a notice.
    let reply = s.get("/search?q=eviction&project=alpha").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), json!([]));
    let notice = reply.headers.get("x-cairn-notice").expect("a notice").to_str().unwrap();
    assert!(notice.contains("other projects"), "{notice}");
    assert_eq!(s.get("/search?q=eviction&project=alpha&all_projects=true").await.expect(200)[0]["project"], "beta");
    assert_eq!(s.get("/search?q=redis&type=bugfix").await.expect(200).as_array().unwrap().len(), 1);
    assert_eq!(s.get("/search?q=redis&limit=1000").await.expect(200).as_array().unwrap().len(), 2);

    s.get("/search").await.expect_error(400, "empty_field");
    s.get("/search?q=%20%20").await.expect_error(400, "empty_field");
    s.get("/search?q=x&limit=abc").await.expect_error(400, "invalid_argument");
    s.get("/search?q=x&limit=-1").await.expect_error(400, "invalid_argument");
    s.get("/search?q=x&all_projects=maybe").await.expect_error(400, "invalid_argument");
    s.get("/search?q=x&mode=fuzzy").await.expect_error(400, "invalid_argument");
    // Semantic search asked for without a model: lexical results, and a notice saying so.
    let reply = s.get("/search?q=redis&mode=semantic").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json().as_array().unwrap().len(), 2);
    let notice = reply.headers.get("x-cairn-notice").expect("a notice").to_str().unwrap();
    assert!(notice.contains("semantic search is unavailable"), "{notice}");
    s.post("/reindex", &json!({})).await.expect_error(503, "model_missing");
    s.get("/search?q=x&scope=galaxy").await.expect_error(400, "invalid_argument");
}

#[tokio::test]
async fn timeline_and_context() {
    let s = start().await;
    for i in 1..=3 {
        let step = json!({"title": format!("step {i}"), "content": format!("did step {i}"),
            "session_id": "s", "project": "p"});
        s.save(step).await;
    }
    let timeline = s.get("/timeline?observation_id=2&before=1&after=5").await.expect(200);
    assert_eq!((timeline["focus"]["id"].as_i64(), timeline["focus"]["is_focus"].as_bool()), (Some(2), Some(true)));
    assert_eq!((timeline["before"][0]["id"].as_i64(), timeline["after"][0]["id"].as_i64()), (Some(1), Some(3)));
    assert_eq!(timeline["total_in_range"], 3);
    s.get("/timeline").await.expect_error(400, "invalid_argument");
    s.get("/timeline?observation_id=-2").await.expect_error(400, "invalid_argument");
    s.get("/timeline?observation_id=two").await.expect_error(400, "invalid_argument");
    s.get("/timeline?observation_id=77").await.expect_error(404, "observation_not_found");

    let context = s.get("/context?project=p").await.expect(200);
    assert!(context["context"].as_str().unwrap().contains("step 3"), "{context}");
    assert_eq!(context["memory_ids"].as_array().unwrap().len(), 3);
    assert_eq!(s.get("/context?project=nobody").await.expect(200)["context"], "");
    // engram's hooks send `project=` when detection failed: global context.
    assert!(s.get("/context?project=").await.expect(200)["context"].as_str().unwrap().contains("step 1"));
    s.get("/context?scope=galaxy").await.expect_error(400, "invalid_argument");
}

// ---------------------------------------------------------------------------------------------
// export / import / projects

#[tokio::test]
async fn export_import_round_trip() {
    let s = start().await;
    s.save(json!({"title": "one", "content": "first", "project": "p", "session_id": "s"})).await;
    s.post("/prompts", &json!({"content": "a question", "session_id": "s"})).await.expect(201);
    let reply = s.get("/export").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-disposition"], "attachment; filename=cairn-export.json");
    let export = reply.json();
    assert_eq!(export["observations"].as_array().unwrap().len(), 1);
    s.get("/export?project=").await.expect_error(400, "empty_field");
    assert_eq!(s.get("/export?project=nobody").await.expect(200)["observations"], json!([]));

    let other = start().await;
    let report = other.post("/import", &export).await.expect(200);
    assert_eq!(
        (
            report["sessions_imported"].as_i64(),
            report["observations_imported"].as_i64(),
            report["prompts_imported"].as_i64()
        ),
        (Some(1), Some(1), Some(1))
    );
    let again = other.post("/import", &export).await.expect(200);
    assert_eq!(again["observations_imported"], 0, "importing twice changes nothing: {again}");
    assert_eq!(other.get("/observations/1").await.expect(200)["title"], "one");

    let before = other.store_state().await;
    other.post_raw("/import", b"\xff\xfe{}").await.expect_error(400, "invalid_utf8");
    other.post_raw("/import", b"not json").await.expect_error(400, "invalid_import");
    other.post("/import", &json!([1, 2])).await.expect_error(400, "invalid_import");
    other.post("/import", &json!({"observations": [{"title": 1}]})).await.expect_error(400, "invalid_import");
    let big = json!({"observations": [], "padding": "x".repeat(IMPORT_MAX_BODY)});
    other.post("/import", &big).await.expect_error(413, "payload_too_large");
    assert_eq!(other.store_state().await, before);
}

#[tokio::test]
async fn projects_migrate() {
    let s = start().await;
    s.save(json!({"title": "a", "content": "b", "project": "old-name"})).await;
    let moved =
        s.post("/projects/migrate", &json!({"old_project": "old-name", "new_project": "new-name"})).await.expect(200);
    assert_eq!((moved["status"].as_str(), moved["observations"].as_i64()), (Some("migrated"), Some(1)));
    let skipped = s.post("/projects/migrate", &json!({"old_project": "ghost", "new_project": "x"})).await.expect(200);
    assert_eq!(skipped["status"], "skipped");
    s.post("/projects/migrate", &json!({"old_project": "", "new_project": "x"})).await.expect_error(400, "empty_field");
    s.post("/projects/migrate", &json!({"old_project": "a"})).await.expect_error(400, "invalid_argument");
}

// ---------------------------------------------------------------------------------------------
// conflicts

#[tokio::test]
async fn conflicts_routes() {
    let s = start().await;
    let a = s
        .save(json!({"title": "Redis connection pool exhausted under load", "content": "raised pool to 50",
            "project": "p"}))
        .await;
    let b = s
        .save(json!({"title": "Redis connection pool exhausted during peak load", "content": "pool to 80 now",
            "project": "p", "find_candidates": true}))
        .await;
    let candidate = &b["candidates"][0];
    assert_eq!(candidate["id"], a["id"]);
    let judgment_id = candidate["judgment_id"].as_str().unwrap().to_owned();

    let page = s.get("/conflicts?project=p&status=pending").await.expect(200);
    assert_eq!((page["total"].as_i64(), page["limit"].as_i64()), (Some(1), Some(50)));
    let relation_id = page["relations"][0]["id"].as_i64().unwrap();
    let detail = s.get(&format!("/conflicts/{relation_id}")).await.expect(200);
    assert_eq!(detail["relation_id"], relation_id);
    // The saved memory is the source, its look-alike the target; snippets are engram's names.
    assert_eq!(detail["source_title"], "Redis connection pool exhausted during peak load");
    assert_eq!(detail["target_title"], "Redis connection pool exhausted under load");
    assert_eq!(
        (&detail["source_snippet"], &detail["target_snippet"]),
        (&detail["source_title"], &detail["target_title"])
    );
    insta::assert_json_snapshot!("conflict_detail", scrub(&detail));

    let judged = s
        .post("/conflicts/judge", &json!({"judgment_id": judgment_id, "relation": "supersedes", "confidence": 0.9}))
        .await
        .expect(200);
    assert_eq!(judged["relation"]["judgment_status"], "judged");
    s.post("/conflicts/judge", &json!({"judgment_id": "nope", "relation": "related"}))
        .await
        .expect_error(404, "relation_not_found");
    s.post("/conflicts/judge", &json!({"judgment_id": judgment_id, "relation": "maybe"}))
        .await
        .expect_error(400, "invalid_argument");
    let stats = s.get("/conflicts/stats?project=p").await.expect(200);
    assert_eq!(stats["by_judgment_status"]["judged"], 1);

    let compare = json!({"memory_id_a": a["id"], "memory_id_b": b["id"], "relation": "related", "confidence": 0.5,
        "reasoning": "same topic"});
    let compared = s.post("/conflicts/compare", &compare).await.expect(200);
    assert_eq!(compared["sync_id"], compared["relation"]["sync_id"]);
    let unknown =
        json!({"memory_id_a": 1, "memory_id_b": 404, "relation": "related", "confidence": 0.5, "reasoning": "x"});
    s.post("/conflicts/compare", &unknown).await.expect_error(404, "observation_not_found");
    s.post("/conflicts/compare", &json!({"memory_id_a": 1})).await.expect_error(400, "invalid_argument");

    let scan = s.post("/conflicts/scan", &json!({"project": "p"})).await.expect(200);
    assert_eq!((scan["dry_run"].as_bool(), scan["semantic_judged"].as_i64()), (Some(true), Some(0)));
    let before = s.store_state().await;
    let semantic = s
        .post("/conflicts/scan", &json!({"project": "p", "semantic": true}))
        .await
        .expect_error(503, "llm_not_configured");
    assert_eq!(semantic["detail"], "a semantic scan needs a model to judge with");
    assert_eq!(s.store_state().await, before);

    assert_eq!(
        s.get("/conflicts/deferred?limit=9000").await.expect(200),
        json!({"total": 0, "limit": 500, "rows": []})
    );
    assert_eq!(
        s.post("/conflicts/deferred/replay", &json!({})).await.expect(200),
        json!({"retried": 0, "succeeded": 0, "failed": 0, "dead": 0})
    );
    s.get("/conflicts?since=yesterday").await.expect_error(400, "invalid_argument");
    // Found by fuzzing: a blank `since` is no time either (an empty one means "no limit").
    s.get("/conflicts?since=+").await.expect_error(400, "invalid_argument");
    s.get("/conflicts?since=").await.expect(200);
    s.get("/conflicts/abc").await.expect_error(400, "invalid_argument");
    s.get("/conflicts/999").await.expect_error(404, "relation_not_found");
}

// ---------------------------------------------------------------------------------------------
// the operation RPC

#[tokio::test]
async fn op_rpc_round_trip_and_error_codes() {
    let s = start().await;
    let saved = s
        .post("/v1/op", &json!({"op": "save", "args": {"title": "t", "content": "c", "project": "p"}}))
        .await
        .expect(200);
    assert_eq!(saved["id"], 1);
    assert_eq!(s.post("/v1/op", &json!({"op": "get", "args": {"id": 1}})).await.expect(200)["title"], "t");
    assert_eq!(s.post("/v1/op", &json!({"op": "stats"})).await.expect(200)["total_observations"], 1);
    s.post("/v1/op", &json!({"op": "get", "args": {"id": 9}})).await.expect_error(404, "observation_not_found");
    s.post("/v1/op", &json!({"op": "frobnicate"})).await.expect_error(400, "invalid_argument");
    s.post("/v1/op", &json!({"op": "save", "args": {"title": 3}})).await.expect_error(400, "invalid_argument");
    s.post("/v1/op", &json!({"op": "save", "args": {"title": "", "content": "c"}}))
        .await
        .expect_error(400, "empty_field");
    s.post_raw("/v1/op", b"{\"op\":").await.expect_error(400, "invalid_json");

    // The daemon client (what `cairn mcp` and the CLI use) keeps codes and hints.
    let client = DaemonClient::new(s.addr, None);
    let (ok, err) = tokio::task::spawn_blocking(move || {
        let ok = client.execute(&Op::Get(GetRequest { id: 1, revisions: false }));
        let err = client.execute(&Op::Delete(DeleteRequest { id: 42, hard: false }));
        (ok, err)
    })
    .await
    .unwrap();
    let found = <GetRequest as cairn_core::ops::Request>::output(ok.unwrap()).unwrap();
    assert_eq!(found.observation.id, 1);
    let err = err.unwrap_err();
    assert_eq!(err.code, ErrorCode::ObservationNotFound);
    assert!(err.hint.is_some());
}

// ---------------------------------------------------------------------------------------------
// hostile and malformed input

/// Method, path, body, expected status and code.
type Case = (&'static str, &'static str, Option<&'static [u8]>, u16, &'static str);

#[tokio::test]
async fn malformed_input_is_refused_with_stable_codes_and_changes_nothing() {
    let s = start().await;
    s.save(json!({"title": "keep", "content": "me", "session_id": "s-1", "project": "p"})).await;
    let before = s.store_state().await;
    let cases: &[Case] = &[
        ("POST", "/observations", Some(b"{\"title\": \"t\", "), 400, "invalid_json"),
        ("POST", "/observations", Some(b"{\"title\": \"t\", \"content\": \"c\"} trailing"), 400, "invalid_json"),
        ("POST", "/observations", Some(b""), 400, "invalid_json"),
        ("POST", "/observations", Some(b"[]"), 400, "invalid_argument"),
        ("POST", "/observations", Some(b"{\"content\": \"c\"}"), 400, "invalid_argument"),
        ("POST", "/observations", Some(b"{\"title\": 1, \"content\": \"c\"}"), 400, "invalid_argument"),
        ("POST", "/observations", Some(br#"{"title": "t", "content": "c", "pinned": "yes"}"#), 400, "invalid_argument"),
        ("POST", "/observations", Some(b"{\"title\": \"\", \"content\": \"c\"}"), 400, "empty_field"),
        ("POST", "/observations", Some(b"{\"title\": \"t\xff\", \"content\": \"c\"}"), 400, "invalid_utf8"),
        (
            "POST",
            "/observations",
            Some(br#"{"title": "t", "content": "c", "session_id": "a\nb"}"#),
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/observations",
            Some(br#"{"title": "t", "content": "c", "session_id": "s-1", "project": "other"}"#),
            400,
            "session_project_mismatch",
        ),
        ("POST", "/sessions", Some(b"{\"id\": 7}"), 400, "invalid_argument"),
        ("GET", "/sessions/ghost/activity", None, 404, "session_not_found"),
        ("POST", "/sessions/ghost/activity", Some(br#"{"event": "tool_call"}"#), 404, "session_not_found"),
        ("POST", "/sessions/s-1/activity", Some(br#"{"event": "nap"}"#), 400, "invalid_argument"),
        ("POST", "/sessions/s-1/activity", Some(br#"{"remind": true}"#), 400, "invalid_argument"),
        ("POST", "/sessions/s-1/activity", Some(b"{\"event\": "), 400, "invalid_json"),
        ("POST", "/sessions/s-1/activity", Some(br#"{"event": "prompt", "content": " "}"#), 400, "empty_field"),
        (
            "POST",
            "/sessions/s-1/activity",
            Some(br#"{"event": "save", "saved_session_id": "a\nb"}"#),
            400,
            "invalid_argument",
        ),
        ("POST", "/prompts", Some(b"{}"), 400, "invalid_argument"),
        ("POST", "/conflicts/judge", Some(br#"{"judgment_id": [], "relation": "related"}"#), 400, "invalid_argument"),
        (
            "POST",
            "/conflicts/compare",
            Some(
                br#"{"memory_id_a": "1", "memory_id_b": 2, "relation": "related", "confidence": 1, "reasoning": "r"}"#,
            ),
            400,
            "invalid_argument",
        ),
        ("POST", "/v1/op", Some(b"[\"save\"]"), 400, "invalid_argument"),
        ("GET", "/observations/abc", None, 400, "invalid_argument"),
        ("GET", "/observations/-1", None, 400, "invalid_argument"),
        ("GET", "/observations/0", None, 400, "invalid_argument"),
        ("GET", "/observations/1.5", None, 400, "invalid_argument"),
        ("GET", "/observations/99999999999999999999", None, 400, "invalid_argument"),
        ("DELETE", "/observations/..%2Fetc", None, 400, "invalid_argument"),
        ("DELETE", "/observations/%2e%2e", None, 400, "invalid_argument"),
        ("DELETE", "/observations/1?hard=sure", None, 400, "invalid_argument"),
        ("GET", "/sessions/%FF", None, 400, "invalid_utf8"),
        ("GET", "/observations?limit=-5", None, 400, "invalid_argument"),
        ("GET", "/observations?sort=title", None, 400, "invalid_argument"),
        ("GET", "/observations?offset=x", None, 400, "invalid_argument"),
        ("GET", "/conflicts?limit=many", None, 400, "invalid_argument"),
        ("GET", "/observations/1/../../etc/passwd", None, 404, "route_not_found"),
    ];
    for (method, path, body, status, code) in cases {
        let reply = s.call(method, path, body.map(<[u8]>::to_vec), &[]).await;
        assert_eq!((reply.status, reply.code().as_str()), (*status, *code), "{method} {path}: {}", reply.json());
    }
    assert_eq!(s.store_state().await, before);
}

#[tokio::test]
async fn oversized_bodies_get_413_json_and_change_nothing() {
    let s = start().await;
    let before = s.store_state().await;
    let big = json!({"title": "t", "content": "x".repeat(MAX_BODY)});
    s.post("/observations", &big).await.expect_error(413, "payload_too_large");
    // A body without Content-Length is cut off while it is read.
    let chunk = "x".repeat(MAX_BODY + 100);
    let body = format!("{{\"title\": \"t\", \"content\": \"{chunk}\"}}");
    let request = format!(
        "POST /observations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let (status, reply) = s.raw(request.as_bytes()).await;
    assert_eq!((status, reply["code"].as_str()), (413, Some("payload_too_large")), "{reply}");
    assert_error_shape(&reply);
    assert_eq!(s.store_state().await, before);
    // The operation RPC may carry an import: it takes more, but not without bound.
    let import_sized = json!({"op": "save", "args": {"title": "t", "content": "y".repeat(MAX_BODY * 2)}});
    assert_eq!(s.post("/v1/op", &import_sized).await.expect(200)["truncated_from"], Value::Null);
    let before = s.store_state().await;
    let too_big = json!({"op": "save", "args": {"title": "t", "content": "y".repeat(IMPORT_MAX_BODY)}});
    s.post("/v1/op", &too_big).await.expect_error(413, "payload_too_large");
    assert_eq!(s.store_state().await, before);
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_json() {
    let s = start().await;
    let missing = s.get("/nope").await.expect_error(404, "route_not_found");
    insta::assert_json_snapshot!("route_not_found", missing);
    s.post("/observations/1/frobnicate", &json!({})).await.expect_error(404, "route_not_found");
    let reply = s.call("PUT", "/observations", Some(b"{}".to_vec()), &[]).await;
    let allow = reply.headers.get("allow").map(|v| v.to_str().unwrap().to_owned());
    reply.expect_error(405, "method_not_allowed");
    let allow = allow.expect("an Allow header");
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    s.delete("/health").await.expect_error(405, "method_not_allowed");
}

// ---------------------------------------------------------------------------------------------
// security

#[tokio::test]
async fn foreign_hosts_origins_and_cross_site_requests_are_refused() {
    let s = start().await;
    let before = s.store_state().await;
    let save = || Some(br#"{"title": "t", "content": "c"}"#.to_vec());
    let refused: &[&[(&str, &str)]] = &[
        &[("host", "evil.example")],
        &[("host", "evil.example:7437")],
        &[("host", "127.0.0.1.nip.io")],
        &[("host", "localhost.evil.example")],
        &[("origin", "https://evil.example")],
        &[("origin", "null")],
        &[("sec-fetch-site", "cross-site")],
        &[("origin", "http://localhost:3000"), ("sec-fetch-site", "cross-site")],
    ];
    for headers in refused {
        for (method, path) in [("POST", "/observations"), ("GET", "/stats"), ("GET", "/nope"), ("GET", "/health")] {
            let body = if method == "POST" { save() } else { None };
            let reply = s.call(method, path, body, headers).await;
            assert_eq!((reply.status, reply.code().as_str()), (403, "forbidden"), "{method} {path} {headers:?}");
        }
    }
    assert_eq!(s.store_state().await, before);
    // HTTP/1.0 without a Host header at all.
    let (status, body) = s.raw(b"GET /stats HTTP/1.0\r\n\r\n").await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));

    let allowed: &[&[(&str, &str)]] = &[
        &[("host", "localhost:7437")],
        &[("host", "[::1]:7437")],
        &[("host", "app.localhost")],
        &[("origin", "http://localhost:5173"), ("sec-fetch-site", "same-site")],
        &[("origin", "http://127.0.0.1:7437"), ("sec-fetch-site", "same-origin")],
        &[("sec-fetch-site", "none")],
    ];
    for headers in allowed {
        s.call("GET", "/stats", None, headers).await.expect(200);
    }
}

/// Every family of route that changes something, with a body it accepts.
fn change_routes(id: i64) -> Vec<(&'static str, String, Option<Vec<u8>>)> {
    let body = |v: Value| Some(serde_json::to_vec(&v).unwrap());
    vec![
        ("POST", "/observations".into(), body(json!({"title": "t", "content": "c"}))),
        ("PATCH", format!("/observations/{id}"), body(json!({"title": "changed"}))),
        ("POST", format!("/observations/{id}/pin"), None),
        ("DELETE", format!("/observations/{id}"), None),
        ("POST", "/sessions".into(), body(json!({"id": "s-new", "project": "p"}))),
        ("POST", "/prompts".into(), body(json!({"session_id": "s-new", "content": "hi"}))),
        ("POST", "/import".into(), body(json!({"version": 1, "observations": []}))),
        ("POST", "/v1/op".into(), body(json!({"op": "pin", "args": {"id": id, "pinned": true}}))),
        ("POST", "/mcp".into(), body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))),
        ("POST", format!("/ui/memory/{id}/pin"), Some(b"pinned=true".to_vec())),
    ]
}

async fn start_with_mcp_stub() -> Server {
    let mcp = axum::Router::new().route("/", axum::routing::post(|| async { "mcp-stub" }));
    start_with(|c| c.mcp = Some(mcp)).await
}

#[tokio::test]
async fn changes_are_taken_only_from_the_daemons_own_origin_or_from_tools_on_every_route() {
    let s = start_with_mcp_stub().await;
    let id = s.save(json!({"title": "kept", "content": "as it was"})).await["id"].as_i64().unwrap();
    let before = s.store_state().await;
    let other_port = format!("http://127.0.0.1:{}", s.addr.port() + 1);
    let own = format!("http://127.0.0.1:{}", s.addr.port());
    let refused: Vec<Vec<(&str, &str)>> = vec![
        vec![("origin", other_port.as_str())],
        vec![("origin", "http://localhost:5173"), ("sec-fetch-site", "same-site")],
        vec![("origin", own.as_str()), ("sec-fetch-site", "same-site")],
        vec![("sec-fetch-site", "same-site")],
        vec![("origin", "null")],
    ];
    for headers in &refused {
        for (method, path, body) in change_routes(id) {
            let reply = s.call(method, &path, body, headers).await;
            assert_eq!((reply.status, reply.code().as_str()), (403, "forbidden"), "{method} {path} {headers:?}");
        }
    }
    assert_eq!(s.store_state().await, before, "nothing changed");
    // Reads from another local page stay as they were (a page cannot read the answers anyway).
    s.call("GET", "/stats", None, &[("origin", other_port.as_str())]).await.expect(200);

    // The daemon's own origin, under each loopback name, and tools (no browser headers) may.
    let port = s.addr.port();
    let own_origins: Vec<String> =
        ["127.0.0.1", "localhost", "[::1]"].iter().map(|h| format!("http://{h}:{port}")).collect();
    let mut senders: Vec<Vec<(&str, &str)>> = vec![vec![], vec![("sec-fetch-site", "none")]];
    senders.extend(own_origins.iter().map(|o| vec![("origin", o.as_str()), ("sec-fetch-site", "same-origin")]));
    for headers in &senders {
        let body = serde_json::to_vec(&json!({"title": "t", "content": format!("sent with {headers:?}")})).unwrap();
        let saved = s.call("POST", "/observations", Some(body), headers).await;
        let id = saved.expect(201)["id"].as_i64().unwrap();
        for (method, path, body) in change_routes(id) {
            let mut headers = headers.clone();
            if path.starts_with("/ui/") {
                headers.push(("content-type", "application/x-www-form-urlencoded"));
            }
            let reply = s.call(method, &path, body, &headers).await;
            assert!(
                !matches!(reply.status, 403 | 415),
                "{method} {path} {headers:?}: {} {}",
                reply.status,
                String::from_utf8_lossy(&reply.bytes)
            );
        }
    }
}

#[tokio::test]
async fn bodies_a_page_may_send_anywhere_are_refused_on_json_routes() {
    let s = start_with_mcp_stub().await;
    let id = s.save(json!({"title": "kept", "content": "as it was"})).await["id"].as_i64().unwrap();
    let before = s.store_state().await;
    for kind in ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b"] {
        for (method, path, body) in change_routes(id).into_iter().filter(|(_, p, _)| !p.starts_with("/ui/")) {
            let body = body.or_else(|| Some(Vec::new()));
            let reply = s.call(method, &path, body, &[("content-type", kind)]).await;
            assert_eq!(
                (reply.status, reply.code().as_str()),
                (415, "unsupported_media_type"),
                "{method} {path} {kind}"
            );
        }
    }
    assert_eq!(s.store_state().await, before, "nothing changed");
}

#[tokio::test]
async fn http11_without_a_host_header_is_refused() {
    let s = start().await;
    let port = s.addr.port();
    let absolute = format!("GET http://127.0.0.1:{port}/health HTTP/1.1\r\nConnection: close\r\n\r\n");
    for request in [
        &b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
        b"GET /stats HTTP/1.1\r\nConnection: close\r\n\r\n",
        absolute.as_bytes(),
    ] {
        let (status, body) = s.raw(request).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("missing_host")),
            "{}",
            String::from_utf8_lossy(request)
        );
    }
    let (status, _) = s.raw(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await;
    assert_eq!(status, 200);
}

/// A slowloris client: it sends its request head a byte at a time and never finishes it. The
/// server must close the connection (the bound here is generous; the timeout is 200 ms).
#[tokio::test]
async fn a_client_that_never_finishes_its_request_head_is_disconnected() {
    let s = start_with(|c| c.header_read_timeout = Duration::from_millis(200)).await;
    let mut slow = Vec::new();
    for _ in 0..5 {
        let stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        let (mut read, mut write) = stream.into_split();
        let trickle = tokio::spawn(async move {
            let mut sent = write.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n").await;
            while sent.is_ok() {
                tokio::time::sleep(Duration::from_millis(20)).await;
                sent = write.write_all(b"X").await;
            }
        });
        let closed = tokio::spawn(async move {
            let mut answer = Vec::new();
            let _ = read.read_to_end(&mut answer).await; // an end or a reset: closed either way
            answer
        });
        slow.push((closed, trickle));
    }
    for (closed, trickle) in slow {
        let answer =
            tokio::time::timeout(TIMEOUT, closed).await.expect("the slow connection was never closed").unwrap();
        assert!(!answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
        trickle.abort();
    }
    s.get("/health").await.expect(200);
}

#[tokio::test]
async fn token_is_required_everywhere_but_health() {
    let s = start_with(|c| c.token = Some("s3cret-token".into())).await;
    let reply = s.get("/stats").await;
    assert_eq!(reply.headers.get("www-authenticate").map(|v| v.to_str().unwrap()), Some("Bearer"));
    reply.expect_error(401, "unauthorized");
    s.call("GET", "/stats", None, &[("authorization", "Bearer wrong")]).await.expect_error(401, "unauthorized");
    s.call("GET", "/stats", None, &[("authorization", "Basic s3cret-token")]).await.expect_error(401, "unauthorized");
    s.call("GET", "/nope", None, &[]).await.expect_error(401, "unauthorized");
    s.call("GET", "/openapi.json", None, &[]).await.expect_error(401, "unauthorized");
    let before = s.call("GET", "/export", None, &[("authorization", "Bearer s3cret-token")]).await.expect(200);
    s.post("/observations", &json!({"title": "t", "content": "c"})).await.expect_error(401, "unauthorized");
    let after = s.call("GET", "/export", None, &[("authorization", "Bearer s3cret-token")]).await.expect(200);
    assert_eq!(before["observations"], after["observations"]);

    let auth = [("authorization", "Bearer s3cret-token")];
    s.call("GET", "/stats", None, &auth).await.expect(200);
    s.call("GET", "/stats", None, &[("authorization", "bearer s3cret-token")]).await.expect(200);
    // Health stays open for probes, but still checks Host and Origin.
    s.get("/health").await.expect(200);
    s.call("GET", "/health", None, &[("host", "evil.example")]).await.expect_error(403, "forbidden");
    // A valid token lets a client use a non-loopback Host (a daemon bound beyond loopback)...
    s.call("GET", "/stats", None, &[auth[0], ("host", "192.168.1.5:7437")]).await.expect(200);
    // ...but never a cross-site browser request.
    s.call("GET", "/stats", None, &[auth[0], ("origin", "https://evil.example")]).await.expect_error(403, "forbidden");
    // The daemon client sends the token.
    let client = DaemonClient::new(s.addr, Some("s3cret-token".into()));
    let stats = tokio::task::spawn_blocking(move || client.execute(&Op::Stats)).await.unwrap().unwrap();
    assert_eq!(<StatsRequest as cairn_core::ops::Request>::output(stats).unwrap().total_observations, 0);
    let anonymous = DaemonClient::new(s.addr, None);
    let err = tokio::task::spawn_blocking(move || anonymous.execute(&Op::Stats)).await.unwrap().unwrap_err();
    assert_eq!(err.code, ErrorCode::Unauthorized);
}

#[tokio::test]
async fn mcp_router_is_nested_behind_the_same_guards() {
    let mcp = axum::Router::new().route("/", axum::routing::post(|| async { "mcp-stub" }));
    let s = start_with(|c| {
        c.mcp = Some(mcp);
        c.token = Some("tok".into());
    })
    .await;
    let auth = ("authorization", "Bearer tok");
    let reply = s.call("POST", "/mcp", Some(b"{}".to_vec()), &[auth]).await;
    assert_eq!((reply.status, reply.bytes.as_ref()), (200, b"mcp-stub".as_ref()));
    s.call("POST", "/mcp", Some(b"{}".to_vec()), &[]).await.expect_error(401, "unauthorized");
    s.call("POST", "/mcp", Some(b"{}".to_vec()), &[auth, ("origin", "https://evil.example")])
        .await
        .expect_error(403, "forbidden");
    let big = vec![b' '; MAX_BODY + 1];
    s.call("POST", "/mcp", Some(big), &[auth]).await.expect_error(413, "payload_too_large");
    let doc = s.call("GET", "/openapi.json", None, &[auth]).await.expect(200);
    assert!(doc["paths"]["/mcp"]["post"].is_object());
}

// ---------------------------------------------------------------------------------------------
// OpenAPI

/// Every route served, as (method, path template).
const ROUTES: &[(&str, &str)] = &[
    ("get", "/health"),
    ("post", "/sessions"),
    ("post", "/sessions/{id}/end"),
    ("post", "/spool/drain"),
    ("get", "/sessions/recent"),
    ("get", "/sessions/{id}"),
    ("delete", "/sessions/{id}"),
    ("get", "/sessions/{id}/activity"),
    ("post", "/sessions/{id}/activity"),
    ("post", "/observations"),
    ("get", "/observations"),
    ("get", "/observations/recent"),
    ("get", "/observations/{id}"),
    ("patch", "/observations/{id}"),
    ("delete", "/observations/{id}"),
    ("post", "/observations/{id}/restore"),
    ("post", "/observations/{id}/pin"),
    ("post", "/observations/{id}/unpin"),
    ("post", "/observations/passive"),
    ("get", "/search"),
    ("get", "/timeline"),
    ("post", "/prompts"),
    ("get", "/prompts/recent"),
    ("get", "/prompts/search"),
    ("delete", "/prompts/{id}"),
    ("get", "/context"),
    ("get", "/export"),
    ("post", "/import"),
    ("get", "/stats"),
    ("get", "/doctor"),
    ("get", "/projects"),
    ("get", "/project/current"),
    ("post", "/projects/migrate"),
    ("get", "/sync/status"),
    ("post", "/sync/import"),
    ("post", "/sync/remote"),
    ("get", "/conflicts"),
    ("get", "/conflicts/stats"),
    ("get", "/conflicts/deferred"),
    ("post", "/conflicts/deferred/replay"),
    ("post", "/conflicts/scan"),
    ("post", "/conflicts/judge"),
    ("post", "/conflicts/compare"),
    ("get", "/conflicts/{relation_id}"),
    ("post", "/v1/op"),
    ("post", "/memories"),
    ("get", "/memories"),
    ("post", "/memories/search"),
    ("delete", "/memories/{id}"),
    ("post", "/extract"),
    ("get", "/openapi.json"),
    ("post", "/reindex"),
    ("get", "/protocol"),
    ("get", "/config"),
    ("get", "/history/sessions"),
    ("get", "/history/turns"),
    ("get", "/history/messages"),
    ("get", "/history/message"),
    ("get", "/history/part"),
    ("get", "/history/search"),
    ("get", "/history/chart"),
    ("get", "/history/compactions"),
    ("get", "/history/children"),
    ("get", "/history/stats"),
    ("post", "/history/ingest"),
    ("delete", "/history/sessions/{id}"),
    ("get", "/history/plans"),
    ("get", "/history/context-usage"),
];

fn documented_routes(doc: &Value) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            routes.insert((method.clone(), path.clone()));
        }
    }
    routes
}

#[tokio::test]
async fn openapi_documents_exactly_the_routes_served() {
    let s = start().await;
    let doc = s.get("/openapi.json").await.expect(200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "9.9.9-test");
    let expected: BTreeSet<(String, String)> = ROUTES.iter().map(|(m, p)| ((*m).to_owned(), (*p).to_owned())).collect();
    assert_eq!(documented_routes(&doc), expected);
    // Each documented route is served (not the unknown-route or wrong-method fallback)...
    for (method, path) in &expected {
        let concrete = path.replace("{id}", "424242").replace("{relation_id}", "424242");
        let body = matches!(method.as_str(), "post" | "patch").then(|| b"{}".to_vec());
        let reply = s.call(&method.to_uppercase(), &concrete, body, &[]).await;
        let code =
            serde_json::from_slice::<Value>(&reply.bytes).ok().and_then(|v| v["code"].as_str().map(str::to_owned));
        assert!(
            !matches!(code.as_deref(), Some("route_not_found" | "method_not_allowed")),
            "{method} {path} is documented but not served"
        );
    }
    // ...and every operation has a unique id, a one-line summary, its success body, the shared
    // refusals and the error table.
    let mut operation_ids = BTreeSet::new();
    for (method, path) in &expected {
        let op = &doc["paths"][path][method];
        assert!(operation_ids.insert(op["operationId"].as_str().unwrap()), "{method} {path}: duplicate operationId");
        assert!(!op["summary"].as_str().unwrap().contains('\n'), "{method} {path}: multi-line summary");
        let responses = op["responses"].as_object().unwrap();
        assert!(responses.keys().any(|k| k.starts_with('2')), "{method} {path} has no success response");
        assert!(responses.contains_key("403") && responses.contains_key("default"), "{method} {path}");
        for (status, response) in responses {
            assert!(
                response.get("description").is_some() || response.get("$ref").is_some(),
                "{method} {path} {status}"
            );
        }
    }
    let codes: BTreeSet<&str> = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(codes, ErrorCode::ALL.iter().map(|c| c.as_str()).collect());
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
}

/// The schema a route documents for a status.
fn response_schema<'a>(doc: &'a Value, method: &str, path: &str, status: u16) -> &'a Value {
    let schema = &doc["paths"][path][method]["responses"][status.to_string()]["content"]["application/json"]["schema"];
    assert!(!schema.is_null(), "{method} {path} documents no {status} body");
    schema
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => resolve(doc, &doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")]),
        None => schema,
    }
}

/// Gather the properties and required keys of `allOf` parts into `merged`, through nested
/// `allOf`s (a flattened core type may itself flatten another).
fn merge_all_of(doc: &Value, parts: &[Value], merged: &mut Value) {
    for part in parts {
        let part = resolve(doc, part);
        if let Some(nested) = part["allOf"].as_array() {
            merge_all_of(doc, nested, merged);
        }
        for (k, v) in part["properties"].as_object().into_iter().flatten() {
            merged["properties"][k] = v.clone();
        }
        for r in part["required"].as_array().into_iter().flatten() {
            merged["required"].as_array_mut().unwrap().push(r.clone());
        }
    }
}

/// Check a JSON value against a documented schema: types, and for objects that every required
/// key is there and no undocumented key is.
fn check_shape(doc: &Value, schema: &Value, value: &Value, at: &str) {
    let schema = resolve(doc, schema);
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema[key].as_array() {
            let non_null: Vec<&Value> = options.iter().filter(|o| o["type"] != "null").collect();
            if value.is_null() && non_null.len() < options.len() {
                return;
            }
            return check_shape(doc, non_null[0], value, at);
        }
    }
    if let Some(parts) = schema["allOf"].as_array() {
        let mut merged = json!({"type": "object", "properties": {}, "required": []});
        merge_all_of(doc, parts, &mut merged);
        return check_shape(doc, &merged, value, at);
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return, // any value
    };
    let fits = types.iter().any(|t| match *t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    });
    assert!(fits, "{at}: {value} is not {types:?}");
    if let (Some(items), Some(values)) = (schema.get("items"), value.as_array()) {
        for (i, v) in values.iter().enumerate() {
            check_shape(doc, items, v, &format!("{at}[{i}]"));
        }
    }
    if let (Some(props), Some(object)) = (schema["properties"].as_object(), value.as_object()) {
        for required in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            assert!(object.contains_key(required), "{at}: missing documented key {required:?} in {value}");
        }
        for (k, v) in object {
            let prop = props.get(k).unwrap_or_else(|| panic!("{at}: key {k:?} is not documented"));
            check_shape(doc, prop, v, &format!("{at}.{k}"));
        }
    }
}

#[tokio::test]
async fn responses_match_their_documented_schemas() {
    let s = start().await;
    let doc = s.get("/openapi.json").await.expect(200);
    let check = |method: &str, path: &str, status: u16, value: &Value| {
        check_shape(&doc, response_schema(&doc, method, path, status), value, &format!("{method} {path}"));
    };
    let session = s.post("/sessions", &json!({"id": "s", "project": "p"})).await.expect(201);
    check("post", "/sessions", 201, &session);
    let a = s
        .save(json!({"title": "Redis pool exhausted under load", "content": "raised to 50", "session_id": "s",
            "topic_key": "bug/redis"}))
        .await;
    check("post", "/observations", 201, &a);
    let b = s
        .save(json!({"title": "Redis pool exhausted during peak load", "content": "raised to 80", "session_id": "s",
            "find_candidates": true}))
        .await;
    check("post", "/observations", 201, &b);
    s.post("/prompts", &json!({"content": "why is redis slow", "session_id": "s"})).await.expect(201);
    s.send("PATCH", "/observations/1", &json!({"content": "raised to 60"})).await.expect(200);

    let gets: &[(&str, &str)] = &[
        ("/health", "/health"),
        ("/stats", "/stats"),
        ("/projects", "/projects"),
        ("/doctor", "/doctor"),
        ("/sync/status", "/sync/status"),
        ("/project/current", "/project/current"),
        ("/observations", "/observations"),
        ("/observations/recent", "/observations/recent"),
        ("/observations/1?revisions=true", "/observations/{id}"),
        ("/search?q=redis", "/search"),
        ("/timeline?observation_id=1", "/timeline"),
        ("/context", "/context"),
        ("/export", "/export"),
        ("/sessions/recent", "/sessions/recent"),
        ("/sessions/s", "/sessions/{id}"),
        ("/sessions/s/activity", "/sessions/{id}/activity"),
        ("/prompts/recent", "/prompts/recent"),
        ("/prompts/search?q=redis", "/prompts/search"),
        ("/conflicts", "/conflicts"),
        ("/conflicts/stats", "/conflicts/stats"),
        ("/conflicts/deferred", "/conflicts/deferred"),
        ("/conflicts/1", "/conflicts/{relation_id}"),
    ];
    for (url, template) in gets {
        let value = s.get(url).await.expect(200);
        check("get", template, 200, &value);
    }
    let posts: &[(&str, Value)] = &[
        ("/observations/1/pin", json!({})),
        ("/observations/1/unpin", json!({})),
        (
            "/observations/passive",
            json!({"content": "## Key Learnings\n- Redis pools need a ceiling under load", "project": "p"}),
        ),
        ("/sessions/s/activity", json!({"event": "prompt", "content": "why is redis slow", "stored_in": "s"})),
        ("/sessions/s/activity", json!({"event": "tool_call", "remind": true})),
        ("/sessions/s/end", json!({"summary": "done"})),
        ("/conflicts/judge", json!({"judgment_id": b["candidates"][0]["judgment_id"], "relation": "supersedes"})),
        (
            "/conflicts/compare",
            json!({"memory_id_a": 1, "memory_id_b": 2, "relation": "related", "confidence": 0.4, "reasoning": "r"}),
        ),
        ("/conflicts/scan", json!({"project": "p", "apply": true})),
        ("/conflicts/deferred/replay", json!({})),
        ("/projects/migrate", json!({"old_project": "p", "new_project": "q"})),
    ];
    for (path, body) in posts {
        let value = s.post(path, body).await.expect(200);
        check("post", path.replace("/1/", "/{id}/").replace("/s/", "/{id}/").as_str(), 200, &value);
    }
    let export = s.get("/export").await.expect(200);
    let other = start().await;
    check("post", "/import", 200, &other.post("/import", &export).await.expect(200));
    check("get", "/observations/{id}", 200, &s.get("/observations/2").await.expect(200));
    check("delete", "/prompts/{id}", 200, &s.delete("/prompts/1").await.expect(200));
    check("delete", "/observations/{id}", 200, &s.delete("/observations/2").await.expect(200));
    s.post("/sessions", &json!({"id": "empty"})).await.expect(201);
    check("delete", "/sessions/{id}", 200, &s.delete("/sessions/empty").await.expect(200));
    // Errors: the shared error response names the ErrorBody schema.
    let error = s.get("/observations/777").await.expect(404);
    check_shape(
        &doc,
        &doc["components"]["responses"]["Error"]["content"]["application/json"]["schema"],
        &error,
        "error",
    );
}

// ---------------------------------------------------------------------------------------------
// concurrency and shutdown

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_saves_all_land() {
    let s = Arc::new(start().await);
    let per_task = [13, 13, 12, 12];
    let mut tasks = Vec::new();
    for (t, count) in per_task.into_iter().enumerate() {
        let s = Arc::clone(&s);
        tasks.push(tokio::spawn(async move {
            let mut acknowledged = 0;
            for i in 0..count {
                let title = format!("task {t} save {i}");
                let body = json!({"title": title, "content": format!("content {t}/{i}"), "project": "load"});
                if s.post("/observations", &body).await.status == 201 {
                    acknowledged += 1;
                }
            }
            acknowledged
        }));
    }
    let mut acknowledged = 0;
    for task in tasks {
        acknowledged += task.await.unwrap();
    }
    assert_eq!(acknowledged, 50);
    let stats = s.get("/stats").await.expect(200);
    assert_eq!(stats["total_observations"], acknowledged);
}

#[tokio::test]
async fn serve_returns_after_the_shutdown_future_resolves() {
    let s = start().await;
    s.get("/health").await.expect(200);
    let addr = s.addr;
    s.shutdown().await.unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the listener is closed");
}

#[tokio::test]
async fn graceful_shutdown_finishes_requests_in_flight() {
    let s = start().await;
    // A request whose body arrives after shutdown began. `Expect: 100-continue` makes the
    // server say when the handler starts reading the body: from then on it is in flight.
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let body = br#"{"title": "late", "content": "still saved"}"#;
    let head = format!(
        "POST /observations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut interim = Vec::new();
    while !interim.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        tokio::time::timeout(TIMEOUT, stream.read_exact(&mut byte)).await.expect("100 Continue").unwrap();
        interim.push(byte[0]);
    }
    assert!(interim.starts_with(b"HTTP/1.1 100"), "{}", String::from_utf8_lossy(&interim));

    let db_path = s.dir.path().join("cairn.db");
    let Server { stop, task, dir, .. } = s;
    let _ = stop.unwrap().send(());
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(body).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut out)).await.expect("a response").unwrap();
    let response = String::from_utf8_lossy(&out);
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    tokio::time::timeout(TIMEOUT, task.unwrap()).await.expect("serve returned").unwrap().unwrap();
    let db = Engine::open(&db_path).unwrap();
    assert_eq!(db.call(StatsRequest).await.unwrap().total_observations, 1);
    drop(dir);
}

/// The ops and routes host plugins call (issue 13).
mod plugin;

/// The web page at `/ui`.
mod ui;

/// opencode-memory's `/memories` and `POST /extract`, with a scripted model.
mod wire;

/// Issue 42's replaced decision: the newest fact first, judged supersession, semantic scans.
mod supersession;

// ---------------------------------------------------------------------------------------------
// Conversation history

/// A session with two turns, a compaction and a third turn, written straight into the
/// daemon's history.db (the readers that fill it are tested in cairn-core).
fn seed_history(dir: &std::path::Path) {
    use cairn_core::history::model::*;
    use cairn_core::history::{HistoryDb, SourceRef};
    let message = |id: &str, role: HistoryRole, seq: i64| {
        HistoryMessage::new("ses_h", id, role, seq, &format!("2026-03-01T10:00:{seq:02}.000Z"))
    };
    let text = |m: &HistoryMessage, body: &str| HistoryPart {
        text: Some(body.into()),
        ..HistoryPart::new(&m.session_id, &m.id, &format!("{}:0", m.id), 0, PartKind::Text)
    };
    let u1 = message("m1", HistoryRole::User, 1);
    let a1 = message("m2", HistoryRole::Assistant, 2);
    let u2 = message("m3", HistoryRole::User, 3);
    let c = HistoryMessage { compaction: true, ..message("m4", HistoryRole::User, 4) };
    let sm = HistoryMessage { summary: true, ..message("m5", HistoryRole::Assistant, 5) };
    let u3 = message("m6", HistoryRole::User, 6);
    let parts = vec![
        text(&u1, "Plan the cache eviction"),
        text(&a1, &format!("LRU it is. {}", "z".repeat(3000))),
        text(&u2, "Write the eviction test"),
        text(&sm, "Summary: cache eviction planned"),
        text(&u3, "Ship it"),
    ];
    let session = HistorySession {
        id: "ses_h".into(),
        host: HistoryHost::OpenCode,
        project: Some("alpha".into()),
        directory: None,
        parent_id: None,
        title: Some("Cache".into()),
        agent: None,
        model: None,
        created_at: "2026-03-01T10:00:00.000Z".into(),
        updated_at: "2026-03-01T10:00:06.000Z".into(),
    };
    let batch =
        IngestBatch { sessions: vec![session], messages: vec![u1, a1, u2, c, sm, u3], parts, ..Default::default() };
    let mut db = HistoryDb::open(&dir.join("history.db")).unwrap();
    let source = SourceRef { key: "opencode.db#ses_h".into(), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor::default()).unwrap();
}

#[tokio::test]
async fn history_routes_browse_pull_search_and_forget() {
    let s = start().await;
    seed_history(s.dir.path());
    let sessions = s.get("/history/sessions").await.expect(200);
    assert_eq!(sessions[0]["session_id"], "ses_h");
    assert_eq!(sessions[0]["messages"], 6);
    let turns = s.get("/history/turns?session_id=ses_h&num_before=5").await.expect(200);
    assert_eq!(turns["turns"].as_array().unwrap().len(), 3);
    // X-Cairn-Session names the caller: its own session ends at its latest compaction.
    let own =
        s.call("GET", "/history/turns?session_id=ses_h&num_before=5", None, &[("x-cairn-session", "ses_h")]).await;
    assert_eq!(own.expect(200)["turns"].as_array().unwrap().len(), 2);
    s.call("GET", "/history/message?session_id=ses_h&message_id=m6", None, &[("x-cairn-session", "ses_h")])
        .await
        .expect_error(404, "message_not_visible");
    let window = s.get("/history/messages?session_id=ses_h&message_id=m2&num_before=1").await.expect(200);
    assert_eq!(window["before_message_id"], Value::Null);
    assert_eq!(window["after_message_id"], "m3");
    let pulled = s.get("/history/message?session_id=ses_h&message_id=m2").await.expect(200);
    assert_eq!(pulled["sections"][0]["part_id"], "m2:0");
    let page = s.get("/history/part?session_id=ses_h&message_id=m2&part_id=m2:0&max_chars=1000").await.expect(200);
    assert_eq!((page["next_offset"].as_u64(), page["total_chars"].as_u64()), (Some(1000), Some(3011)));
    let found = s.get("/history/search?query=eviction&session_id=ses_h").await.expect(200);
    assert!(found["messages"].as_array().unwrap().len() >= 2, "{found}");
    let chart = s.get("/history/chart?session_id=ses_h").await.expect(200);
    assert!(chart["chart"].as_str().unwrap().starts_with("I lost context"));
    let compactions = s.get("/history/compactions?session_id=ses_h&read=1").await.expect(200);
    assert_eq!(compactions["summary"], "Summary: cache eviction planned");
    assert_eq!(s.get("/history/children?session_id=ses_h").await.expect(200), json!([]));
    let stats = s.get("/history/stats").await.expect(200);
    assert_eq!(stats["hosts"][0]["sessions"], 1);
    // Context usage: no assistant usage in ses_h is an answer; the caller's session by header.
    let usage = s.call("GET", "/history/context-usage", None, &[("x-cairn-session", "ses_h")]).await.expect(200);
    assert_eq!((usage["session_id"].as_str(), usage["source"].as_str()), (Some("ses_h"), Some("caller")));
    assert_eq!(usage["percent"], Value::Null);
    let repo = s.dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join(".opencode/plans")).unwrap();
    std::fs::write(repo.join(".opencode/plans/1767000000000-calm-owl.md"), "# Owl\n").unwrap();
    let plans = s.get(&format!("/history/plans?directory={}", repo.display())).await.expect(200);
    let owl = plans["plans"].as_array().unwrap().iter().find(|p| p["name"] == "1767000000000-calm-owl.md").cloned();
    assert_eq!(owl.unwrap()["heading"], "Owl");
    let read = format!("/history/plans?directory={}&read=1767000000000-calm-owl.md", repo.display());
    assert_eq!(s.get(&read).await.expect(200)["plan"]["text"], "# Owl\n");
    assert_eq!(s.delete("/history/sessions/ses_h").await.expect(200)["status"], "forgotten");
    s.delete("/history/sessions/ses_h").await.expect_error(404, "history_session_not_found");
}

/// What cairn injected into a message (here the OpenCode plugin's Session History guidance)
/// is out of previews and search, and pulled with `injected: true`; the schema says so.
#[tokio::test]
async fn history_routes_mark_what_cairn_injected() {
    use cairn_core::history::model::*;
    use cairn_core::history::{HistoryDb, SourceRef};
    let s = start().await;
    let user = HistoryMessage::new("ses_i", "m1", HistoryRole::User, 1, "2026-03-01T10:00:01.000Z");
    let part = |id: &str, idx: i64, text: &str, injected: bool| HistoryPart {
        text: Some(text.into()),
        injected,
        ..HistoryPart::new("ses_i", "m1", id, idx, PartKind::Text)
    };
    let session = HistorySession {
        id: "ses_i".into(),
        host: HistoryHost::OpenCode,
        project: Some("alpha".into()),
        directory: None,
        parent_id: None,
        title: None,
        agent: None,
        model: None,
        created_at: "2026-03-01T10:00:00.000Z".into(),
        updated_at: "2026-03-01T10:00:01.000Z".into(),
    };
    let batch = IngestBatch {
        sessions: vec![session],
        messages: vec![user],
        parts: vec![
            part("p1", 0, "Rename the billing handlers", false),
            part("p2", 1, "## Session History\ncairn keeps the full conversation history", true),
        ],
        ..Default::default()
    };
    let mut db = HistoryDb::open(&s.dir.path().join("history.db")).unwrap();
    let source = SourceRef { key: "opencode.db#ses_i".into(), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor::default()).unwrap();
    drop(db);
    let turns = s.get("/history/turns?session_id=ses_i").await.expect(200);
    assert_eq!(turns["turns"][0]["user"]["preview"], "Rename the billing handlers");
    let pulled = s.get("/history/message?session_id=ses_i&message_id=m1").await.expect(200);
    assert_eq!(pulled["sections"][0], json!({"type": "text", "content": "Rename the billing handlers"}));
    assert_eq!(pulled["sections"][1]["injected"], true);
    let page = s.get("/history/part?session_id=ses_i&message_id=m1&part_id=p2").await.expect(200);
    assert_eq!(page["injected"], true);
    let found = s.get("/history/search?query=conversation%20history&session_id=ses_i").await.expect(200);
    assert_eq!(found["messages"], json!([]));
    let api = s.get("/openapi.json").await.expect(200);
    for schema in ["PulledPart", "MessagePreview"] {
        let injected = &api["components"]["schemas"][schema]["properties"]["injected"];
        assert_eq!(injected["type"], "boolean", "{schema}: {injected}");
    }
}

#[tokio::test]
async fn history_routes_refuse_bad_input_with_stable_codes() {
    let s = start().await;
    seed_history(s.dir.path());
    let table: &[(&str, u16, &str)] = &[
        ("/history/turns", 400, "invalid_argument"),
        ("/history/turns?session_id=ses_nope", 404, "history_session_not_found"),
        ("/history/turns?session_id=..%2Fetc", 404, "history_session_not_found"),
        ("/history/turns?session_id=ses_h&turn_number=9", 404, "turn_out_of_range"),
        ("/history/turns?session_id=ses_h&num_before=-1", 400, "invalid_argument"),
        ("/history/messages?session_id=ses_h&message_id=nope", 404, "message_not_found"),
        ("/history/message?session_id=ses_h", 400, "invalid_argument"),
        ("/history/message?session_id=ses_h&message_id=a%2Fb", 404, "message_not_found"),
        ("/history/part?session_id=ses_h&message_id=m2&part_id=nope", 404, "part_not_found"),
        ("/history/part?session_id=ses_h&message_id=m2&part_id=m2:0&max_chars=100000000", 400, "invalid_argument"),
        ("/history/part?session_id=ses_h&message_id=m2&part_id=m2:0&offset=999999", 400, "invalid_argument"),
        ("/history/search", 400, "invalid_argument"),
        ("/history/search?query=%20", 400, "empty_field"),
        ("/history/search?query=x&type=pictures", 400, "invalid_argument"),
        ("/history/search?query=x&literal=maybe", 400, "invalid_argument"),
        ("/history/sessions?host=vim", 400, "invalid_argument"),
        ("/history/chart?session_id=ses_nope", 404, "history_session_not_found"),
        ("/history/compactions?session_id=ses_h&read=7", 400, "invalid_argument"),
        ("/history/plans?read=..%2Fx.md", 400, "invalid_argument"),
        ("/history/plans?read=%2Fetc%2Fpasswd", 400, "invalid_argument"),
        ("/history/plans?read=", 400, "invalid_argument"),
        ("/history/plans?read=%20%20", 400, "invalid_argument"),
        ("/history/plans?session_id=..%2F..%2Fetc", 404, "history_session_not_found"),
        ("/history/plans?read=1767000000000-none.md", 404, "file_not_found"),
        ("/history/context-usage?session_id=ses_nope", 404, "history_session_not_found"),
        ("/history/context-usage?limit=9223372036854775808", 400, "invalid_argument"),
        ("/history/context-usage?limit=-1", 400, "invalid_argument"),
    ];
    for (path, status, code) in table {
        let reply = s.get(path).await;
        assert_eq!((reply.status, reply.code().as_str()), (*status, *code), "{path}");
    }
    // A NUL in a Chinese query (schemathesis seed 2280620417): scanned, not an internal error.
    let nul = s.get("/history/search?query=%E6%95%B0%E6%8D%AE%00%E5%BA%93").await.expect(200);
    assert_eq!(nul["messages"], json!([]));
    // A poke names a host's own transcript or database: never another file the daemon could read.
    let secret = s.dir.path().join("secret.jsonl");
    std::fs::write(&secret, "{\"type\":\"user\"}\n").unwrap();
    let ingest: &[(Value, u16, &str)] = &[
        (json!({"path": secret}), 404, "file_not_found"),
        (json!({"path": "/nonexistent/x.jsonl"}), 404, "file_not_found"),
        (json!({"host": "vim"}), 400, "invalid_argument"),
        (json!({"session_id": "../etc/passwd"}), 404, "history_session_not_found"),
        (json!([null, null]), 400, "invalid_argument"),
        (json!("everything"), 400, "invalid_argument"),
    ];
    for (body, status, code) in ingest {
        let reply = s.post("/history/ingest", body).await;
        assert_eq!((reply.status, reply.code().as_str()), (*status, *code), "{body}");
    }
}

/// A NUL character (U+0000) in any text a write carries is refused with its own code, the
/// message naming the field, and nothing stored changes; other control characters (a tab, an
/// escape sequence pasted from a terminal) are kept as they were.
#[tokio::test]
async fn a_nul_character_in_written_text_is_refused_naming_the_field() {
    let s = start().await;
    let kept = "tab\there, colour \u{1b}[31mred\u{1b}[0m, bell \u{7}";
    let id = s.save(json!({"title": "controls", "content": kept, "session_id": "s-1"})).await["id"].as_i64().unwrap();
    assert_eq!(s.get(&format!("/observations/{id}")).await.expect(200)["content"], kept);
    let mut import = s.get("/export").await.expect(200);
    import["observations"][0]["content"] = json!("imported\u{0}text");
    import["observations"][0]["sync_id"] = json!("0190f3c2-0000-7000-8000-000000000001");
    let before = s.store_state().await;
    let cases = [
        ("POST", "/observations".to_owned(), json!({"title": "t", "content": "a\u{0}b"}), "content"),
        ("POST", "/observations".to_owned(), json!({"title": "t\u{0}", "content": "c"}), "title"),
        ("POST", "/observations".to_owned(), json!({"title": "t", "content": "c", "topic_key": "k\u{0}"}), "topic_key"),
        ("PATCH", format!("/observations/{id}"), json!({"content": "x\u{0}y"}), "content"),
        ("POST", "/prompts".to_owned(), json!({"content": "p\u{0}", "session_id": "s-1"}), "content"),
        ("POST", "/sessions".to_owned(), json!({"id": "s\u{0}2"}), "id"),
        ("POST", "/import".to_owned(), import, "observations[0].content"),
    ];
    for (method, path, body, field) in cases {
        let refused = s.send(method, &path, &body).await.expect_error(400, "nul_character");
        assert!(refused["detail"].as_str().unwrap().contains(field), "{method} {path}: {refused}");
    }
    assert_eq!(s.store_state().await, before);
}

/// Deep recall: `deep=true` re-ranks by a scripted model, falls back without one, on nonsense
/// and on a slow model.
mod deep;
