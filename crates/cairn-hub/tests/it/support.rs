//! What every hub test needs: a cluster, a hub, tokens, and an HTTP client.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cairn_hub::tokens::{Access, NewToken};
pub use cairn_pgtest::PgCluster;
use serde_json::{Value, json};

/// A cluster and a fresh database in it, or return from the test (skipped, with a note)
/// when PostgreSQL is not installed.
macro_rules! database {
    () => {
        match $crate::support::PgCluster::start() {
            Some(pg) => {
                let url = pg.create_database("hub");
                (pg, url)
            }
            None => return,
        }
    };
}
pub(crate) use database;

pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(future)
}

/// A hub serving in this process on 127.0.0.1 (plain HTTP), stopped on drop.
pub struct InProcessHub {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcessHub {
    pub fn start(database_url: &str) -> Self {
        Self::start_with(cairn_hub::ServeConfig {
            database_url: database_url.into(),
            listen: "127.0.0.1:0".into(),
            tls: None,
        })
    }

    pub fn start_with(config: cairn_hub::ServeConfig) -> Self {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            runtime.block_on(async move {
                let hub = cairn_hub::bind(&config).await.expect("bind the hub");
                addr_tx.send(hub.local_addr()).expect("report the address");
                hub.run(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("serve");
            });
        });
        let addr = addr_rx.recv_timeout(Duration::from_mins(1)).expect("the hub started");
        InProcessHub { addr, stop: Some(stop), thread: Some(thread) }
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for InProcessHub {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A hub as its own process (this test binary run as `hub_child_process`), killed on drop.
pub struct ChildHub {
    pub child: Child,
    pub port: u16,
}

impl ChildHub {
    pub fn start(database_url: &str, port: u16) -> Self {
        let child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["hub_child_process", "--exact", "--nocapture", "--test-threads=1"])
            .env("CAIRN_HUB_CHILD_DB", database_url)
            .env("CAIRN_HUB_CHILD_LISTEN", format!("127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start the hub process");
        let hub = ChildHub { child, port };
        hub.wait_healthy();
        hub
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_mins(1);
        let agent = agent();
        while Instant::now() < deadline {
            if agent.get(format!("{}/health", self.base())).call().is_ok_and(|r| r.status() == 200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the hub process on port {} never became healthy", self.port);
    }

    /// SIGKILL: no shutdown, no flush, connections cut.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildHub {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// Issue a token straight through the library.
pub fn token(database_url: &str, projects: &[&str], access: Access) -> String {
    token_full(database_url, projects, access).1
}

pub fn token_full(database_url: &str, projects: &[&str], access: Access) -> (i64, String) {
    block_on(async {
        let pool = cairn_hub::db::pool(database_url).unwrap();
        cairn_hub::db::migrate(&pool).await.unwrap();
        let created = cairn_hub::tokens::create(
            &pool,
            &NewToken {
                name: "test".into(),
                projects: projects.iter().map(std::string::ToString::to_string).collect(),
                access,
                expires_in_secs: None,
            },
        )
        .await
        .unwrap();
        (created.id, created.token)
    })
}

/// Run one SQL statement and return the first column of the first row as i64.
pub fn sql_i64(database_url: &str, statement: &str) -> i64 {
    block_on(async {
        let (client, conn) = tokio_postgres::connect(database_url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client.query_one(statement, &[]).await.unwrap().get::<_, i64>(0)
    })
}

pub fn sql_exec(database_url: &str, statement: &str) {
    block_on(async {
        let (client, conn) = tokio_postgres::connect(database_url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client.batch_execute(statement).await.unwrap();
    });
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent()
}

/// A client of one hub with one token.
#[derive(Clone)]
pub struct HubClient {
    pub base: String,
    pub token: String,
    pub agent: ureq::Agent,
}

impl HubClient {
    pub fn new(base: &str, token: &str) -> Self {
        HubClient { base: base.into(), token: token.into(), agent: agent() }
    }

    /// Status and JSON body of a push; `Err` when no answer came (connection refused or cut).
    pub fn try_push(&self, body: &Value) -> Result<(u16, Value), ureq::Error> {
        self.try_push_raw(serde_json::to_vec(body).unwrap())
    }

    pub fn try_push_raw(&self, body: Vec<u8>) -> Result<(u16, Value), ureq::Error> {
        let mut response = self
            .agent
            .post(format!("{}/sync/mutations/push", self.base))
            .header("Authorization", &format!("Bearer {}", self.token))
            .content_type("application/json")
            .send(&body[..])?;
        let status = response.status().as_u16();
        let body = response.body_mut().with_config().limit(64 << 20).read_json::<Value>().unwrap_or(Value::Null);
        Ok((status, body))
    }

    pub fn push(&self, body: &Value) -> (u16, Value) {
        self.try_push(body).expect("the hub answers")
    }

    pub fn push_raw(&self, body: Vec<u8>) -> (u16, Value) {
        self.try_push_raw(body).expect("the hub answers")
    }

    pub fn try_pull(&self, query: &str) -> Result<(u16, Value), ureq::Error> {
        let mut response = self
            .agent
            .get(format!("{}/sync/mutations/pull?{query}", self.base))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()?;
        let status = response.status().as_u16();
        Ok((status, response.body_mut().read_json::<Value>().unwrap_or(Value::Null)))
    }

    pub fn pull(&self, query: &str) -> (u16, Value) {
        self.try_pull(query).expect("the hub answers")
    }

    /// Every mutation visible to this token, following `has_more` from seq 0.
    pub fn pull_all(&self) -> Vec<Value> {
        let mut since = 0;
        let mut all = Vec::new();
        loop {
            let (status, body) = self.pull(&format!("since_seq={since}&limit=100"));
            assert_eq!(status, 200, "{body}");
            let page = body["mutations"].as_array().unwrap().clone();
            if let Some(last) = page.last() {
                since = last["seq"].as_i64().unwrap();
            }
            all.extend(page);
            if !body["has_more"].as_bool().unwrap() {
                return all;
            }
        }
    }
}

/// A memory upsert entry with an idempotency key.
pub fn entry(project: &str, key: &str, mutation_id: &str) -> Value {
    json!({
        "project": project,
        "entity": "observation",
        "entity_key": key,
        "op": "upsert",
        "payload": { "sync_id": key, "title": format!("title {key}"), "content": "text" },
        "mutation_id": mutation_id,
    })
}

pub fn seqs(body: &Value) -> Vec<i64> {
    body["accepted_seqs"]
        .as_array()
        .unwrap_or_else(|| panic!("no accepted_seqs in {body}"))
        .iter()
        .map(|s| s.as_i64().unwrap())
        .collect()
}

pub fn mutation_count(database_url: &str) -> i64 {
    sql_i64(database_url, "SELECT count(*) FROM hub_mutations")
}
