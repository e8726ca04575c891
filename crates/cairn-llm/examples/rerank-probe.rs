//! Deep recall read pointwise, measured before it is built: the local model asked, for each of a
//! question's first-stage candidates, whether the passage helps answer it, and scored by how
//! likely its first answer token is "yes" rather than "no" (one prefill per candidate, no
//! generation; the instructions and the question come first, so their cache is shared).
//!
//! Reads the candidates `scripts/eval-http.py --dump-candidates FILE` wrote (one JSON object a
//! line: `query`, `hits` with `title` and `content`) and writes one line per question with a
//! score per hit (`ln P(yes) - ln P(no)`), for `scripts/rerank-probe.py` to turn into recall.
//!
//! ```text
//! cargo run --release -p cairn-llm --features local --example rerank-probe -- \
//!     --candidates FILE --out FILE [--model NAME] [--top 20]
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::time::Instant;

use cairn_llm::local::{LocalProvider, default_model, find, test_model_file};
use cairn_llm::{ChatMessage, ChatRequest};

const INSTRUCTIONS: &str = "You help an assistant recall a long conversation. You get a question and one \
passage from the conversation: a message, who said it and when. Say whether the passage holds \
information needed to answer the question: the fact asked about, the event, the date or the \
person's words. A passage that only shares words or a topic with the question does not count. \
Answer with one word: yes or no.";

fn request(query: &str, hit: &serde_json::Value) -> ChatRequest {
    let title = hit["title"].as_str().unwrap_or_default();
    let content = hit["content"].as_str().unwrap_or_default();
    ChatRequest {
        messages: vec![
            ChatMessage::system(INSTRUCTIONS),
            ChatMessage::user(format!(
                "Question: {query}\n\nPassage ({title}): {content}\n\nDoes the passage help answer the question?"
            )),
        ],
        max_tokens: 1,
        temperature: 0.0,
        json: false,
    }
}

fn log_add(a: f32, b: f32) -> f32 {
    let max = a.max(b);
    if max == f32::NEG_INFINITY { max } else { max + ((a - max).exp() + (b - max).exp()).ln() }
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let candidates = arg(&args, "--candidates").expect("--candidates FILE");
    let out = arg(&args, "--out").expect("--out FILE");
    let top: usize = arg(&args, "--top").map_or(20, |n| n.parse().expect("--top N"));
    let spec = arg(&args, "--model").map_or_else(default_model, |name| find(&name).expect("a catalogue model"));
    let path = test_model_file(spec).expect("the model's file in target/test-deps/llm (install-test-deps.sh llm-qwen)");
    let provider = LocalProvider::open(&path, spec).expect("the model loads");
    let mut written = std::fs::File::create(&out).expect("--out is writable");
    let reader = std::io::BufReader::new(std::fs::File::open(&candidates).expect("--candidates is readable"));
    let started = Instant::now();
    for (n, line) in reader.lines().enumerate() {
        let question: serde_json::Value = serde_json::from_str(&line.expect("a line")).expect("a JSON line");
        let query = question["query"].as_str().expect("a query");
        let asked = Instant::now();
        let scores: Vec<f32> = question["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .take(top)
            .map(|hit| {
                let p = provider
                    .next_token_logprobs(&request(query, hit), &["yes", "Yes", "no", "No"])
                    .expect("the model scores");
                log_add(p[0], p[1]) - log_add(p[2], p[3])
            })
            .collect();
        let seconds = asked.elapsed().as_secs_f64();
        writeln!(written, "{}", serde_json::json!({"index": n, "scores": scores, "seconds": seconds})).unwrap();
        written.flush().unwrap();
        eprintln!(
            "[{n}] {} candidates in {seconds:.1} s ({:.0} s in all)",
            scores.len(),
            started.elapsed().as_secs_f64()
        );
    }
}
