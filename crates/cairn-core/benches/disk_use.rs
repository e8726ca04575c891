//! What `stats`' disk use costs at scale: `Store::disk_use` on a store of `--count` memories
//! (default 100,000) of ~200..2,000 bytes, each with a 384-dim f32 vector, its first call (the
//! `dbstat` walk of every page) and the calls after it (the measure re-used), and the whole of
//! `Store::stats`. Medians of `--runs` runs.
//!
//! `cargo bench -p cairn-core --bench disk_use -- --count 100000`
//! (`CAIRN_BENCH_DB=/tmp/disk.db` keeps the store for a second run.)
#![allow(clippy::print_stdout, clippy::cast_precision_loss)]

use std::time::{Duration, Instant};

use cairn_core::memory::NewObservation;
use cairn_core::store::Store;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A little xorshift: the same store every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn prose(&mut self, words: usize) -> String {
        (0..words).map(|_| format!("w{}", self.next() % 20_000)).collect::<Vec<_>>().join(" ")
    }
}

fn fill(store: &mut Store, count: usize) {
    let mut rng = Rng(0x5eed);
    let started = Instant::now();
    for i in 0..count {
        let words = 30 + (rng.next() % 250) as usize;
        let new = NewObservation {
            title: format!("{} {i}", rng.prose(4)),
            content: rng.prose(words),
            project: Some(format!("p{}", i % 8)),
            ..NewObservation::default()
        };
        store.save(&new).expect("save");
    }
    loop {
        let pending = store.pending_embeddings("bench-model", 1000).expect("pending");
        if pending.is_empty() {
            break;
        }
        let items: Vec<_> = pending.into_iter().map(|p| (p, vec![0.05_f32; 384])).collect();
        store.put_embeddings("bench-model", &items).expect("vectors");
    }
    println!("filled {count} memories with vectors in {:.1} s", started.elapsed().as_secs_f64());
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    let (count, runs) = (arg("--count", 100_000), arg("--runs", 21));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = std::env::var_os("CAIRN_BENCH_DB").map_or_else(|| dir.path().join("cairn.db"), std::path::PathBuf::from);
    let mut store = Store::open(&path).expect("open");
    if store.stats().expect("stats").total_observations == 0 {
        fill(&mut store, count);
    }
    // The walk a first call makes (the page cache warm, as in a daemon that has been answering).
    store.disk_use().expect("warm the page cache");
    let walks: Vec<Duration> = (0..runs.min(7))
        .map(|_| {
            let fresh = &store;
            let t = Instant::now();
            let disk = fresh.disk_use_remeasured().expect("disk use");
            let elapsed = t.elapsed();
            std::hint::black_box(disk);
            elapsed
        })
        .collect();
    let reused: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(store.disk_use().expect("disk use"));
            t.elapsed()
        })
        .collect();
    let stats: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(store.stats().expect("stats"));
            t.elapsed()
        })
        .collect();
    let disk = store.disk_use().expect("disk use");
    println!("{disk:#?}");
    println!("disk_use, dbstat walk (first call)   median {:>9.3} ms", median(walks));
    println!("disk_use, measure re-used            median {:>9.3} ms", median(reused));
    println!("Store::stats (counts + disk use)     median {:>9.3} ms", median(stats));
}
