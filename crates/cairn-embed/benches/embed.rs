//! Embedding costs: one short query, one memory-sized text, a ~100-word text, one
//! maximum-length text, the tokenizer alone, a scan over stored vectors. Needs the model
//! (`CAIRN_TEST_MODEL_DIR` or `target/test-deps/all-MiniLM-L6-v2`); without it only the
//! dot-product benchmark runs. The `e5_*` benchmarks run multilingual-e5-small
//! (`scripts/install-test-deps.sh e5`; `CAIRN_TEST_E5_DIR`) and print the process's RSS once
//! it is loaded. The `nomic_*` ones run nomic-embed-text-v1.5 from a converted directory
//! (`CAIRN_TEST_NOMIC_DIR`: `cargo run --release -p cairn-embed --example import-nomic -- GGUF DIR`).
//! The `gemma_*` ones run EmbeddingGemma-300m (`scripts/install-test-deps.sh gemma`;
//! `CAIRN_TEST_GEMMA_DIR`).
//!
//! `cargo bench -p cairn-embed --bench embed`

use std::sync::OnceLock;

use cairn_embed::{Embedder, LocalModel, dot, dot_i8_rows};

fn main() {
    divan::main();
}

fn model() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let before = rss_mb();
            let model = LocalModel::load(&cairn_embed::install::test_model_dir()).ok()?;
            #[allow(clippy::print_stderr)] // the figure this benchmark exists to report
            {
                eprintln!("all-MiniLM-L6-v2 loaded: RSS {before:.0} MB before, {:.0} MB after", rss_mb());
            }
            Some(model)
        })
        .as_ref()
}

/// multilingual-e5-small, when installed; prints the RSS before and after loading it.
fn e5() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let before = rss_mb();
            let model = LocalModel::load(&cairn_embed::install::test_e5_dir()).ok()?;
            #[allow(clippy::print_stderr)] // the figure this benchmark exists to report
            {
                eprintln!("multilingual-e5-small loaded: RSS {before:.0} MB before, {:.0} MB after", rss_mb());
            }
            Some(model)
        })
        .as_ref()
}

/// nomic-embed-text-v1.5, when `CAIRN_TEST_NOMIC_DIR` names a converted copy; prints the RSS
/// before and after loading it.
fn nomic() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = std::env::var_os("CAIRN_TEST_NOMIC_DIR")?;
            let before = rss_mb();
            let started = std::time::Instant::now();
            let model = LocalModel::load(std::path::Path::new(&dir)).ok()?;
            #[allow(clippy::print_stderr)] // the figure this benchmark exists to report
            {
                eprintln!(
                    "nomic-embed-text-v1.5 loaded in {:.2} s: RSS {before:.0} MB before, {:.0} MB after",
                    started.elapsed().as_secs_f64(),
                    rss_mb()
                );
            }
            Some(model)
        })
        .as_ref()
}

/// EmbeddingGemma-300m, when the test deps hold its folder (`scripts/install-test-deps.sh
/// gemma`; `CAIRN_TEST_GEMMA_DIR`); prints the load time and the RSS before and after.
fn gemma() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = cairn_embed::install::test_gemma_dir()?;
            let before = rss_mb();
            let started = std::time::Instant::now();
            let model = LocalModel::load(&dir).ok()?;
            #[allow(clippy::print_stderr)] // the figure this benchmark exists to report
            {
                eprintln!(
                    "embeddinggemma-300m loaded in {:.2} s: RSS {before:.0} MB before, {:.0} MB after",
                    started.elapsed().as_secs_f64(),
                    rss_mb()
                );
            }
            Some(model)
        })
        .as_ref()
}

/// Resident set size of this process (Linux; 0 elsewhere).
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kb.unwrap_or(0.0) / 1024.0
}

/// ~100 words, the size of a typical memory with its title.
const WORDS_100: &str = "Fixed the flaky login test on CI: the session cookie expired between the redirect and the \
    assertion because the test clock ran on wall time. The test now freezes time with a fake clock and the retry \
    loop was removed from the helper. Root cause was a 30 second token lifetime set in the staging config. We also \
    added a regression test that runs the whole login flow twice with a frozen clock, and documented the fake clock \
    in the testing guide so that the next person who touches the session code knows why it is there.";

const QUERY: &str = "how did we fix the flaky login test on CI";
const MEMORY: &str = "Fixed the flaky login test on CI: the session cookie expired between the redirect and the \
    assertion because the test clock ran on wall time. The test now freezes time with a fake clock and the retry \
    loop was removed from the helper. Root cause was a 30 second token lifetime set in the staging config.";

/// A short query: 15 tokens with [CLS] and [SEP], despite the name (kept for comparisons).
#[divan::bench]
fn query_10_tokens(bencher: divan::Bencher) {
    let Some(m) = model() else { return };
    bencher.bench(|| m.embed_queries(&[divan::black_box(QUERY)]).unwrap());
}

#[divan::bench]
fn memory_60_tokens(bencher: divan::Bencher) {
    let Some(m) = model() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(MEMORY)]).unwrap());
}

#[divan::bench]
fn words_100(bencher: divan::Bencher) {
    let Some(m) = model() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(WORDS_100)]).unwrap());
}

#[divan::bench]
fn e5_query(bencher: divan::Bencher) {
    let Some(m) = e5() else { return };
    bencher.bench(|| m.embed_queries(&[divan::black_box(QUERY)]).unwrap());
}

#[divan::bench]
fn e5_memory_60_tokens(bencher: divan::Bencher) {
    let Some(m) = e5() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(MEMORY)]).unwrap());
}

#[divan::bench]
fn e5_words_100(bencher: divan::Bencher) {
    let Some(m) = e5() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(WORDS_100)]).unwrap());
}

#[divan::bench]
fn nomic_query(bencher: divan::Bencher) {
    let Some(m) = nomic() else { return };
    bencher.bench(|| m.embed_queries(&[divan::black_box(QUERY)]).unwrap());
}

#[divan::bench]
fn nomic_memory_60_tokens(bencher: divan::Bencher) {
    let Some(m) = nomic() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(MEMORY)]).unwrap());
}

#[divan::bench]
fn nomic_words_100(bencher: divan::Bencher) {
    let Some(m) = nomic() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(WORDS_100)]).unwrap());
}

#[divan::bench]
fn gemma_query(bencher: divan::Bencher) {
    let Some(m) = gemma() else { return };
    bencher.bench(|| m.embed_queries(&[divan::black_box(QUERY)]).unwrap());
}

#[divan::bench]
fn gemma_memory_60_tokens(bencher: divan::Bencher) {
    let Some(m) = gemma() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(MEMORY)]).unwrap());
}

#[divan::bench]
fn gemma_words_100(bencher: divan::Bencher) {
    let Some(m) = gemma() else { return };
    bencher.bench(|| m.embed(&[divan::black_box(WORDS_100)]).unwrap());
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

/// The scan semantic search runs: an i8 query against every stored i8 vector (one thread).
#[divan::bench(args = [100_000])]
fn scan_i8_384(bencher: divan::Bencher, n: usize) {
    let codes: Vec<i8> = (0..n * 384).map(|i| ((i * 7919) % 255) as u8 as i8).collect();
    let query: Vec<i8> = (0..384).map(|i| ((i * 37) % 255) as u8 as i8).collect();
    let mut out = Vec::with_capacity(n);
    bencher.bench_local(|| {
        out.clear();
        dot_i8_rows(divan::black_box(&query), &codes, &mut out);
        out[n / 2]
    });
}
