//! The local model in `cairn-llm-worker`, the process the default `cairn` runs it in: the real
//! binary cargo built for these tests, on the real SmolLM2 file (`local.rs` says where it is).

use std::path::Path;

use cairn_llm::local::{LocalProvider, SMOLLM2_135M};
use cairn_llm::worker::WorkerProvider;
use cairn_llm::{ChatMessage, ChatRequest, LlmError, LlmProvider};

use crate::local::model;

const WORKER: &str = env!("CARGO_BIN_EXE_cairn-llm-worker");

fn ask(text: &str, max_tokens: u32, json: bool) -> ChatRequest {
    ChatRequest { messages: vec![ChatMessage::user(text)], max_tokens, temperature: 0.0, json }
}

#[test]
fn the_worker_answers_what_the_model_in_process_answers() {
    let Some(path) = model() else { return };
    let worker = WorkerProvider::open(Path::new(WORKER), &path, &SMOLLM2_135M).unwrap();
    let in_process = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    assert_eq!((worker.kind(), worker.model()), ("local", "smollm2-135m-instruct"));
    let questions = [
        ask("What is the capital of France?", 12, false),
        ChatRequest {
            messages: vec![
                ChatMessage::system("Answer with JSON only."),
                ChatMessage::user("List two colours as a JSON object like {\"colours\": [\"red\", \"blue\"]}."),
                ChatMessage::assistant("{\"colours\": ["),
            ],
            max_tokens: 48,
            temperature: 0.0,
            json: true,
        },
    ];
    for request in &questions {
        assert_eq!(worker.chat(request).unwrap(), in_process.chat(request).unwrap(), "{request:?}");
    }
}

#[test]
fn a_prompt_too_long_for_the_model_is_the_same_error_through_the_worker() {
    let Some(path) = model() else { return };
    let worker = WorkerProvider::open(Path::new(WORKER), &path, &SMOLLM2_135M).unwrap();
    let huge = "lighthouse ".repeat(20_000);
    let error = worker.chat(&ask(&huge, 8, false)).expect_err("more than the model's context");
    assert!(matches!(error, LlmError::ContextFull { limit, .. } if limit > 0), "{error:?}");
    assert!(worker.chat(&ask("Say hi.", 4, false)).is_ok(), "the worker goes on after a refused call");
}

#[test]
fn a_killed_worker_fails_one_call_as_retryable_and_the_next_starts_it_again() {
    let Some(path) = model() else { return };
    let worker = WorkerProvider::open(Path::new(WORKER), &path, &SMOLLM2_135M).unwrap();
    let request = ask("Name a colour.", 6, false);
    let before = worker.chat(&request).unwrap();
    let pid = worker.worker_pid().expect("running");
    let killed = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status().unwrap();
    assert!(killed.success());
    let error = worker.chat(&request).expect_err("the worker is gone");
    assert!(matches!(error, LlmError::Unavailable(_)) && error.retryable(), "{error:?}");
    assert_eq!(worker.chat(&request).unwrap(), before, "a new worker, the same answer");
    assert_ne!(worker.worker_pid(), Some(pid));
}

#[test]
fn a_file_that_is_not_the_model_is_refused_when_the_worker_starts() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join(SMOLLM2_135M.file_name);
    std::fs::write(&bogus, b"GGUF not really").unwrap();
    let error = WorkerProvider::open(Path::new(WORKER), &bogus, &SMOLLM2_135M).expect_err("not the model");
    assert!(matches!(&error, LlmError::ModelFile(m) if m.contains("bytes")), "{error:?}");
}

/// The worker binary on the model at `path`, its stdin and stdout piped to this test.
fn spawn_worker(path: &Path) -> std::process::Child {
    std::process::Command::new(WORKER)
        .args(["--model", SMOLLM2_135M.name, "--file"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A line that is no request (not JSON, a wrong shape) is answered with a `malformed` error,
/// and the worker goes on to answer the next request.
#[test]
fn a_line_that_is_no_request_is_refused_and_the_next_is_answered() {
    use std::io::{BufRead, Write};
    let Some(path) = model() else { return };
    let mut child = spawn_worker(&path);
    let mut stdin = child.stdin.take().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut next = |out: &mut std::io::BufReader<_>| {
        line.clear();
        out.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    assert!(next(&mut out).get("ready").is_some());
    let request = serde_json::to_string(&ask("Say hi.", 4, false)).unwrap();
    write!(stdin, "not json\n{{\"messages\": 7}}\n{request}\n").unwrap();
    stdin.flush().unwrap();
    for _ in 0..2 {
        let refused = next(&mut out);
        assert_eq!(refused["error"]["kind"], "malformed", "{refused}");
    }
    let answered = next(&mut out);
    assert!(answered["reply"]["text"].is_string(), "{answered}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn the_worker_ends_when_its_input_closes() {
    let Some(path) = model() else { return };
    let mut child = spawn_worker(&path);
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    std::io::BufRead::read_line(&mut out, &mut ready).unwrap();
    assert!(ready.starts_with("{\"ready\""), "{ready}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "a closed stdin is a clean end, not an error");
}

#[test]
fn bad_arguments_are_a_usage_error() {
    let out = std::process::Command::new(WORKER).arg("--model").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: cairn-llm-worker"));
    let out = std::process::Command::new(WORKER).args(["--model", "gpt-9", "--file", "/x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no local model called \"gpt-9\""));
}
