//! Load on one hub: 20 clients pushing at once (throughput, push latency p50/p95), then pull
//! latency. A real PostgreSQL (a throwaway cluster that syncs commits to disk) and a hub in
//! this process over loopback HTTP.
//!
//! `cargo bench -p cairn-hub --bench hub` (short by default);
//! `CAIRN_HUB_BENCH_PUSHES=200 CAIRN_HUB_BENCH_BATCH=50` for a longer run.
#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::sync::mpsc;
use std::time::{Duration, Instant};

use cairn_hub::tokens::{Access, NewToken};
use cairn_pgtest::PgCluster;
use serde_json::json;

const CLIENTS: usize = 20;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let Some(pg) = PgCluster::start_durable() else { return };
    let url = pg.create_database("bench");
    let pushes = env_usize("CAIRN_HUB_BENCH_PUSHES", 25);
    let batch = env_usize("CAIRN_HUB_BENCH_BATCH", 10);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (addr, token) = runtime.block_on(async {
        let hub = cairn_hub::bind(&cairn_hub::ServeConfig {
            database_url: url.clone(),
            listen: "127.0.0.1:0".into(),
            tls: None,
        })
        .await
        .expect("bind");
        let pool = cairn_hub::db::pool(&url).expect("pool");
        let token = cairn_hub::tokens::create(
            &pool,
            &NewToken {
                name: "bench".into(),
                projects: vec!["bench".into()],
                access: Access::ReadWrite,
                expires_in_secs: None,
            },
        )
        .await
        .expect("token")
        .token;
        let addr = hub.local_addr();
        tokio::spawn(hub.run(std::future::pending()));
        (addr, token)
    });
    let base = format!("http://{addr}");

    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (tx, base, token) = (tx.clone(), base.clone(), token.clone());
            std::thread::spawn(move || {
                let agent = ureq::Agent::new_with_defaults();
                for n in 0..pushes {
                    let entries: Vec<_> = (0..batch)
                        .map(|i| {
                            let key = format!("c{c}-{n}-{i}");
                            json!({ "project": "bench", "entity": "observation", "entity_key": key, "op": "upsert",
                                    "payload": { "sync_id": key, "title": "a memory", "content": "x".repeat(400) }, "mutation_id": key })
                        })
                        .collect();
                    let t = Instant::now();
                    agent
                        .post(format!("{base}/sync/mutations/push"))
                        .header("Authorization", &format!("Bearer {token}"))
                        .send_json(json!({ "entries": entries }))
                        .expect("push");
                    tx.send(t.elapsed()).expect("report");
                }
            })
        })
        .collect();
    drop(tx);
    for c in clients {
        c.join().expect("client");
    }
    let wall = started.elapsed();
    let mut push: Vec<Duration> = rx.iter().collect();
    let mutations = push.len() * batch;
    println!(
        "hub push: {CLIENTS} clients × {pushes} pushes × {batch} entries = {mutations} mutations in {:.2} s",
        wall.as_secs_f64()
    );
    println!(
        "  throughput {:.0} mutations/s, {:.0} pushes/s; push latency p50 {:.1} ms, p95 {:.1} ms",
        mutations as f64 / wall.as_secs_f64(),
        push.len() as f64 / wall.as_secs_f64(),
        percentile(&mut push, 0.50),
        percentile(&mut push, 0.95)
    );

    let agent = ureq::Agent::new_with_defaults();
    let mut pull = Vec::new();
    let mut since = 0_i64;
    loop {
        let t = Instant::now();
        let body: serde_json::Value = agent
            .get(format!("{base}/sync/mutations/pull?since_seq={since}&limit=100"))
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .expect("pull")
            .body_mut()
            .read_json()
            .expect("json");
        pull.push(t.elapsed());
        if let Some(last) = body["mutations"].as_array().and_then(|m| m.last()) {
            since = last["seq"].as_i64().expect("seq");
        }
        if body["has_more"] != true {
            break;
        }
    }
    println!(
        "hub pull: {} pages of ≤100 mutations; latency p50 {:.1} ms, p95 {:.1} ms",
        pull.len(),
        percentile(&mut pull, 0.50),
        percentile(&mut pull, 0.95)
    );
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(index).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}
