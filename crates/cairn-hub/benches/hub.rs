//! Load on one hub: clients pushing at once (throughput, push latency p50/p95), then pull
//! latency, then every client syncing at once (a push, then a pull of what the others pushed
//! since its last pull), with PostgreSQL's size and this process's RSS (the hub and the bench's
//! client threads). A real PostgreSQL (a throwaway cluster that syncs commits to disk) and a hub
//! in this process over loopback HTTP.
//!
//! `cargo bench -p cairn-hub --bench hub` (short by default);
//! `CAIRN_HUB_BENCH_PUSHES=200 CAIRN_HUB_BENCH_BATCH=50` for a longer run;
//! `CAIRN_HUB_BENCH_CLIENTS=50 CAIRN_HUB_BENCH_PREFILL=1000000` for issue 44's team hub: 50
//! clients against a hub already holding a million mutations (written straight into its table
//! first, as a year of a team's pushes would leave it).
#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::sync::mpsc;
use std::time::{Duration, Instant};

use cairn_hub::tokens::{Access, NewToken};
use cairn_pgtest::PgCluster;
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let Some(pg) = PgCluster::start_durable() else { return };
    let url = pg.create_database("bench");
    let pushes = env_usize("CAIRN_HUB_BENCH_PUSHES", 25);
    let batch = env_usize("CAIRN_HUB_BENCH_BATCH", 10);
    let clients = env_usize("CAIRN_HUB_BENCH_CLIENTS", 20);
    let prefill = env_usize("CAIRN_HUB_BENCH_PREFILL", 0);
    let syncs = env_usize("CAIRN_HUB_BENCH_SYNCS", 10);
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
        prefill_mutations(&pool, prefill).await;
        (addr, token)
    });
    let base = format!("http://{addr}");

    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (tx, base, token) = (tx.clone(), base.clone(), token.clone());
            std::thread::spawn(move || {
                let agent = ureq::Agent::new_with_defaults();
                for n in 0..pushes {
                    tx.send(push(&agent, &base, &token, &format!("c{c}-{n}"), batch)).expect("report");
                }
            })
        })
        .collect();
    drop(tx);
    for c in threads {
        c.join().expect("client");
    }
    let wall = started.elapsed();
    let mut push: Vec<Duration> = rx.iter().collect();
    let mutations = push.len() * batch;
    println!(
        "hub push: {clients} clients × {pushes} pushes × {batch} entries = {mutations} mutations in {:.2} s (hub held {prefill} before)",
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
    // From the first pushed mutation: a million prefilled ones would take a fresh client 10,000
    // pages, which is the first sync's figure (docs/benchmarks/sync.md), not this one.
    let mut since = i64::try_from(prefill).expect("prefill");
    loop {
        let (took, more) = pull_page(&agent, &base, &token, &mut since);
        pull.push(took);
        if !more {
            break;
        }
    }
    println!(
        "hub pull: {} pages of ≤100 mutations; latency p50 {:.1} ms, p95 {:.1} ms",
        pull.len(),
        percentile(&mut pull, 0.50),
        percentile(&mut pull, 0.95)
    );

    let (mut push, mut pull) = everyone_syncing(&base, &token, clients, syncs, batch, prefill + mutations);
    println!(
        "hub sync: {clients} clients × {syncs} syncs at once (push {batch}, then pull what is new); push p50 {:.1} ms, \
         p95 {:.1} ms; pull p50 {:.1} ms, p95 {:.1} ms",
        percentile(&mut push, 0.50),
        percentile(&mut push, 0.95),
        percentile(&mut pull, 0.50),
        percentile(&mut pull, 0.95)
    );
    let sizes = runtime.block_on(database_sizes(&url));
    println!(
        "hub size: database {:.1} MiB, hub_mutations with its indexes {:.1} MiB; this process's RSS {:.1} MiB",
        sizes.0 as f64 / 1_048_576.0,
        sizes.1 as f64 / 1_048_576.0,
        rss_kib() as f64 / 1024.0
    );
}

/// `count` mutations written straight into the hub's table, 400 bytes of content each, in
/// 100,000-row statements.
async fn prefill_mutations(pool: &deadpool_postgres::Pool, count: usize) {
    if count == 0 {
        return;
    }
    let started = Instant::now();
    let client = pool.get().await.expect("connection");
    let mut done = 0_i64;
    let count = i64::try_from(count).expect("count");
    while done < count {
        let upto = (done + 100_000).min(count);
        client
            .execute(
                "INSERT INTO hub_mutations (project, entity, entity_key, op, payload, mutation_id)
                 SELECT 'bench', 'observation', 'pre-' || n, 'upsert',
                        jsonb_build_object('sync_id', 'pre-' || n, 'title', 'a memory ' || n, 'content', repeat('x', 400)),
                        'pre-' || n
                 FROM generate_series($1::bigint, $2::bigint) AS n",
                &[&(done + 1), &upto],
            )
            .await
            .expect("prefill");
        done = upto;
    }
    client.execute("ANALYZE hub_mutations", &[]).await.expect("analyze");
    println!("hub prefill: {count} mutations in {:.1} s", started.elapsed().as_secs_f64());
}

/// Every client at once, `syncs` times: a push of `batch` entries, then a pull from its own
/// cursor until nothing is left (what the others pushed meanwhile). Latencies of each push and
/// each pull page.
fn everyone_syncing(
    base: &str,
    token: &str,
    clients: usize,
    syncs: usize,
    batch: usize,
    seen: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (tx, base, token) = (tx.clone(), base.to_owned(), token.to_owned());
            std::thread::spawn(move || {
                let agent = ureq::Agent::new_with_defaults();
                let mut since = i64::try_from(seen).expect("cursor");
                for n in 0..syncs {
                    tx.send((true, push(&agent, &base, &token, &format!("sync-c{c}-{n}"), batch))).expect("report");
                    loop {
                        let (took, more) = pull_page(&agent, &base, &token, &mut since);
                        tx.send((false, took)).expect("report");
                        if !more {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    drop(tx);
    for t in threads {
        t.join().expect("client");
    }
    let (mut push, mut pull) = (Vec::new(), Vec::new());
    for (is_push, took) in rx {
        if is_push { push.push(took) } else { pull.push(took) }
    }
    (push, pull)
}

/// One push of `batch` entries keyed `{prefix}-{i}`; its latency.
fn push(agent: &ureq::Agent, base: &str, token: &str, prefix: &str, batch: usize) -> Duration {
    let entries: Vec<_> = (0..batch)
        .map(|i| {
            let key = format!("{prefix}-{i}");
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
    t.elapsed()
}

/// One pull page from `since` (moved past it); its latency and whether more is waiting.
fn pull_page(agent: &ureq::Agent, base: &str, token: &str, since: &mut i64) -> (Duration, bool) {
    let t = Instant::now();
    let body: serde_json::Value = agent
        .get(format!("{base}/sync/mutations/pull?since_seq={since}&limit=100"))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .expect("pull")
        .body_mut()
        .read_json()
        .expect("json");
    let took = t.elapsed();
    if let Some(last) = body["mutations"].as_array().and_then(|m| m.last()) {
        *since = last["seq"].as_i64().expect("seq");
    }
    (took, body["has_more"] == true)
}

async fn database_sizes(url: &str) -> (i64, i64) {
    let pool = cairn_hub::db::pool(url).expect("pool");
    let client = pool.get().await.expect("connection");
    let row = client
        .query_one("SELECT pg_database_size(current_database()), pg_total_relation_size('hub_mutations')", &[])
        .await
        .expect("sizes");
    (row.get(0), row.get(1))
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(index).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}
