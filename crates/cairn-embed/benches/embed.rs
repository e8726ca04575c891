//! Embedding costs: one short query, one memory-sized text, one maximum-length text, the
//! tokenizer alone, a scan over stored vectors. Needs the model (`CAIRN_TEST_MODEL_DIR` or
//! `target/test-deps/all-MiniLM-L6-v2`); without it only the dot-product benchmark runs.
//!
//! `cargo bench -p cairn-embed --bench embed`

use std::sync::OnceLock;

use cairn_embed::{Embedder, LocalModel, dot};

fn main() {
    divan::main();
}

fn model() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL.get_or_init(|| LocalModel::load(&cairn_embed::install::test_model_dir()).ok()).as_ref()
}

const QUERY: &str = "how did we fix the flaky login test on CI";
const MEMORY: &str = "Fixed the flaky login test on CI: the session cookie expired between the redirect and the \
    assertion because the test clock ran on wall time. The test now freezes time with a fake clock and the retry \
    loop was removed from the helper. Root cause was a 30 second token lifetime set in the staging config.";

/// A short query: 15 tokens with [CLS] and [SEP], despite the name (kept for comparisons).
#[divan::bench]
fn query_10_tokens(bencher: divan::Bencher) {
    let Some(m) = model() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(QUERY)]).unwrap());
}

#[divan::bench]
fn memory_60_tokens(bencher: divan::Bencher) {
    let Some(m) = model() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(MEMORY)]).unwrap());
}

/// The longest text the model takes: 256 tokens (the memory five times over, truncated).
#[divan::bench]
fn long_256_tokens(bencher: divan::Bencher) {
    let Some(m) = model() else { return };
    let text = MEMORY.repeat(5);
    assert_eq!(m.tokenize(&text).unwrap().len(), 256);
    bencher.bench(|| m.embed(&[divan::black_box(text.as_str())]).unwrap());
}

/// The tokenizer alone, on the texts above and on one far past the model's length (a pasted
/// log: every word of it is tokenized before the truncation).
#[divan::bench(args = ["query", "memory", "long", "huge"])]
fn tokenize(bencher: divan::Bencher, text: &str) {
    let Some(m) = model() else { return };
    let text = match text {
        "query" => QUERY.to_owned(),
        "memory" => MEMORY.to_owned(),
        "long" => MEMORY.repeat(5),
        _ => MEMORY.repeat(100),
    };
    bencher.counter(divan::counter::BytesCount::of_str(&text)).bench(|| m.tokenize(divan::black_box(&text)).unwrap());
}

#[divan::bench(args = [10_000, 100_000])]
fn dot_scan_384(bencher: divan::Bencher, n: usize) {
    let vectors: Vec<f32> = (0..n * 384).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    let query: Vec<f32> = (0..384).map(|i| i as f32 / 384.0).collect();
    bencher.bench(|| {
        let mut best = f32::MIN;
        for v in vectors.chunks_exact(384) {
            best = best.max(dot(&query, v));
        }
        best
    });
}
