//! `cairn-eval` end to end: the real binary on the coding set (lexical without a model), its
//! errors, and the fitting of the re-ranking model with the test model.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env { dir: tempfile::tempdir().unwrap() }
    }

    /// `cairn-eval` in a fresh data dir; no model unless `with_model` gives one.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn-eval"));
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env("CAIRN_DATA_DIR", self.dir.path().join("data"))
            .env("CAIRN_AUTOSTART", "never")
            .env_remove("CAIRN_MODEL_DIR")
            .env_remove("CAIRN_EMBEDDER")
            .env_remove("CAIRN_LOCOMO")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.run(&[args, &["--json"]].concat());
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn error_code(out: &Output) -> String {
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    value["error"]["code"].as_str().unwrap_or_default().to_owned()
}

fn coding_set() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/coding-memory.json")
}

/// The test model (`scripts/install-test-deps.sh model`), or `None` to skip the parts that
/// need it; never `None` under `CAIRN_REQUIRE_MODEL` (CI), where a missing model fails.
fn model_dir() -> Option<PathBuf> {
    let dir = cairn_embed::install::test_model_dir();
    if cairn_embed::missing_file(&dir).is_none() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CAIRN_REQUIRE_MODEL").is_none(),
        "CAIRN_REQUIRE_MODEL is set but there is no model in {} (run scripts/install-test-deps.sh model)",
        dir.display()
    );
    eprintln!("note: no model in {}; skipping the parts that need it", dir.display());
    None
}

#[test]
fn scores_the_coding_set_and_refuses_bad_files() {
    let env = Env::new();
    let set = coding_set();
    let reports = env.json(&["--coding-file", set.to_str().unwrap(), "--modes", "lexical", "--split", "dev"]);
    let lexical = &reports[0]["modes"]["lexical"]["all"];
    assert_eq!(lexical["questions"], 53, "{lexical}");
    assert!(lexical["recall_at_5"].as_f64().unwrap() > 0.8, "{lexical}");
    // --dump: a line per memory and per question; without a model, no semantic ranking.
    let dump = env.dir.path().join("rankings.jsonl");
    let args = ["--coding-file", set.to_str().unwrap(), "--modes", "lexical", "--split", "dev", "--dump"];
    env.json(&[&args[..], &[dump.to_str().unwrap()]].concat());
    env.json(&[&args[..], &[dump.to_str().unwrap()]].concat());
    let lines: Vec<Value> =
        std::fs::read_to_string(&dump).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let questions: Vec<&Value> = lines.iter().filter(|l| l.get("question").is_some()).collect();
    assert_eq!(questions.len(), 53, "a second run replaces the file");
    assert!(lines.iter().filter(|l| l.get("memory").is_some()).count() > 100);
    let first = questions[0];
    assert!(!first["lexical"].as_array().unwrap().is_empty(), "{first}");
    assert_eq!(first["semantic"], json!([]), "{first}");
    assert_eq!(first["hybrid"], json!([]), "{first}");
    let out = env.run(&[&args[..], &["/nonexistent/dir/rankings.jsonl", "--json"]].concat());
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(3), "invalid_argument"));
    let out = env.run(&["--coding-file", "/nonexistent.json", "--json"]);
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(4), "file_not_found"));
    let bad = env.dir.path().join("bad.json");
    std::fs::write(&bad, b"{\"memories\": 3}").unwrap();
    let out = env.run(&["--coding-file", bad.to_str().unwrap(), "--json"]);
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(3), "invalid_argument"));
}

#[test]
fn locomo_needs_its_file_named() {
    let env = Env::new();
    let out = env.run(&["--sets", "coding,locomo", "--json"]);
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(3), "invalid_argument"));
    assert!(stderr(&out).contains("--locomo FILE"), "{}", stderr(&out));
    // CAIRN_LOCOMO names it too: a missing file is then the error.
    let out =
        env.cmd(&["--sets", "locomo", "--json"]).env("CAIRN_LOCOMO", "/nonexistent/locomo10.json").output().unwrap();
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(4), "file_not_found"));
}

#[test]
fn fits_the_rerank_model() {
    let Some(model) = model_dir() else { return };
    let env = Env::new();
    // One project of the coding set: a debug build embeds a memory in about a second.
    let full: Value = serde_json::from_slice(&std::fs::read(coding_set()).unwrap()).unwrap();
    let in_project = |v: &Value| v["project"] == "ferrite";
    let memories: Vec<&Value> = full["memories"].as_array().unwrap().iter().filter(|m| in_project(m)).collect();
    let keys: Vec<&Value> = memories.iter().map(|m| &m["key"]).collect();
    let questions: Vec<Value> = full["questions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| in_project(q) && q["expected"].as_array().unwrap().iter().all(|k| keys.contains(&k)))
        .map(|q| {
            let mut q = q.clone();
            q["split"] = json!("dev");
            q
        })
        .collect();
    let set = env.dir.path().join("ferrite.json");
    std::fs::write(&set, json!({"memories": memories, "questions": questions}).to_string()).unwrap();
    let args =
        ["--coding-file", set.to_str().unwrap(), "--modes", "hybrid", "--split", "dev", "--fit-rerank", "--json"];
    let out = env.cmd(&args).env("CAIRN_MODEL_DIR", &model).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let reports: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(reports[0]["model"].as_str().unwrap().contains("all-MiniLM-L6-v2"), "{reports}");
    let hybrid = &reports[0]["modes"]["hybrid"]["all"];
    assert!(hybrid["recall_at_5"].as_f64().unwrap() >= 0.9, "{hybrid}");
    // The fitted constant, one line per feature, ready to paste into rerank.rs.
    let printed = stderr(&out);
    assert!(printed.contains("pub const ALL_MINILM_L6_V2: Fitted = Fitted {"), "{printed}");
    assert!(printed.contains("model: \"all-MiniLM-L6-v2\","), "{printed}");
    // Two passes, each one weight a line: the features, then (second pass) its own two.
    let pass = |name: &str| -> Vec<f64> {
        printed
            .lines()
            .skip_while(|l| l.trim() != format!("{name}: Linear {{"))
            .skip(2)
            .take_while(|l| !l.trim_start().starts_with(']'))
            .map(|l| l.trim().split(',').next().unwrap().parse().unwrap())
            .collect()
    };
    let (first, second) = (pass("first"), pass("second"));
    assert_eq!(first.len(), cairn_core::search::rerank::FEATURES, "{printed}");
    assert_eq!(second.len(), cairn_core::search::rerank::SECOND_FEATURES, "{printed}");
    assert!(first[0] > 0.0, "a better place in the fusion means more relevant: {printed}");
    assert!(printed.contains("    bias: "), "{printed}");
}

/// The held-out coding set can never feed a fit: every question is a test question, and
/// every expected memory exists; it loads and scores as `--sets heldout`.
#[test]
fn the_held_out_set_has_only_test_questions_and_scores() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/coding-heldout.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let keys: Vec<&str> = doc["memories"].as_array().unwrap().iter().map(|m| m["key"].as_str().unwrap()).collect();
    let questions = doc["questions"].as_array().unwrap();
    assert!(questions.len() >= 30);
    for q in questions {
        assert_eq!(q["split"], "test", "{q}");
        for e in q["expected"].as_array().unwrap() {
            assert!(keys.contains(&e.as_str().unwrap()), "{q}");
        }
    }
    let env = Env::new();
    let held_out = path.to_str().unwrap();
    let report = env.json(&["--sets", "heldout", "--heldout-file", held_out, "--modes", "lexical", "--split", "test"]);
    assert_eq!(report[0]["set"], "heldout");
    assert_eq!(report[0]["modes"]["lexical"]["all"]["questions"], json!(questions.len()));
    // Nothing of it is dev: the split a fit reads has no question to score.
    let dev = env.json(&["--sets", "heldout", "--heldout-file", held_out, "--modes", "lexical", "--split", "dev"]);
    assert!(dev[0]["modes"]["lexical"]["all"].is_null(), "{dev}");
}

/// A recorded run replayed (`--provider replay`): the same answers give the same memories and
/// figures with no model; a session the recording lacks fails alone, and no recording is a
/// clear error.
#[test]
fn extraction_replays_a_recorded_run_to_the_same_memories() {
    let env = Env::new();
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/extraction");
    let set = set.to_str().unwrap();
    let args = ["extraction", "--split", "dev", "--dir", set, "--sessions", "s01,s03,s05", "--details"];
    let recorded = env.json(&[&args[..], &["--provider", "scripted"]].concat());
    let file = env.dir.path().join("recorded.json");
    // Only s01 and s03 recorded: s05 fails, the others replay.
    let mut partial = recorded.clone();
    partial["per_session"].as_array_mut().unwrap().truncate(2);
    std::fs::write(&file, partial.to_string()).unwrap();
    let replayed = env.json(&[&args[..], &["--provider", "replay", "--replay", file.to_str().unwrap()]].concat());
    for i in 0..2 {
        assert_eq!(replayed["per_session"][i]["memories"], recorded["per_session"][i]["memories"], "{replayed}");
    }
    assert_eq!(replayed["failures"].as_u64(), Some(1), "{replayed}");
    assert!(replayed["per_session"][2]["failure"].as_str().unwrap().contains("replay"), "{replayed}");
    let out = env.run(&[&args[..], &["--provider", "replay", "--json"]].concat());
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(3), "invalid_argument"));
    let out = env.run(&[&args[..], &["--provider", "replay", "--replay", "/nonexistent.json", "--json"]].concat());
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(4), "file_not_found"));
    std::fs::write(&file, b"{\"per_session\": 3}").unwrap();
    let out = env.run(&[&args[..], &["--provider", "replay", "--replay", file.to_str().unwrap(), "--json"]].concat());
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(3), "invalid_argument"));
}

/// The extraction set through the real pipeline with the oracle (answers are the annotation's
/// own notes): every fact recalled, nearly every memory correct, no noise; an unknown split is
/// a clear error.
#[test]
fn extraction_with_the_oracle_recalls_every_fact_of_the_set() {
    let env = Env::new();
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/extraction");
    let set = set.to_str().unwrap();
    let report = env.json(&["extraction", "--provider", "scripted", "--split", "all", "--dir", set]);
    assert_eq!((report["sessions"].as_u64(), report["facts"].as_u64()), (Some(492), Some(1840)), "{report}");
    assert_eq!(report["recall"].as_f64(), Some(1.0), "{report}");
    // The developer's rules are saved without the model (`extract::directives`): one the
    // annotation does not name counts against precision even beside a perfect model.
    assert!(report["precision"].as_f64().unwrap() >= 0.95, "{report}");
    assert_eq!((report["noise"].as_u64(), report["failures"].as_u64()), (Some(0), Some(0)), "{report}");
    assert_eq!(report["retrieval"]["questions"].as_u64(), Some(984), "{report}");
    let follow_ups = cairn_core::extract::ExtractionPolicy::default().follow_ups.len() as u64;
    assert_eq!(report["calls"].as_u64(), Some(492 * (1 + follow_ups)), "one window a session by default: {report}");
    // The daemon's summaries: one a session (each is archived whole, and has ended), searched
    // in a third figure and never scored as facts.
    let two = ["extraction", "--provider", "scripted", "--split", "dev", "--dir", set, "--sessions", "s01,s03"];
    let summarised = env.json(&[&two[..], &["--summaries"]].concat());
    let facts_only = env.json(&two);
    assert_eq!(summarised["retrieval"]["summaries"].as_u64(), Some(2), "{summarised}");
    assert!(summarised["retrieval"]["with_summaries_hit_at_1"].as_f64().is_some(), "{summarised}");
    assert!(facts_only["retrieval"]["with_summaries_hit_at_1"].is_null(), "{facts_only}");
    for figure in ["memories", "recall", "precision"] {
        assert_eq!(summarised[figure], facts_only[figure], "summaries are not scored: {figure}");
    }
    assert_eq!(summarised["retrieval"]["extracted_hit_at_1"], facts_only["retrieval"]["extracted_hit_at_1"]);
    assert_eq!(summarised["calls"].as_u64(), facts_only["calls"].as_u64().map(|n| n + 2), "{summarised}");
    // Small windows: more calls, each session's messages all asked about.
    let windowed =
        env.json(&["extraction", "--provider", "scripted", "--split", "dev", "--dir", set, "--window-bytes", "512"]);
    assert!(windowed["calls"].as_u64().unwrap() > 2 * 12, "{windowed}");
    let out = env.run(&["extraction", "--provider", "scripted", "--split", "train", "--dir", set]);
    let hint = stderr(&out);
    assert!(!out.status.success() && hint.contains("--split dev, test, holdout, "), "{hint}");
    // The hint names every split of the set, so a folder added without its name in the list fails.
    for folder in std::fs::read_dir(set).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
        let name = folder.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(hint.contains(&format!(" {name},")) || hint.contains(&format!(" {name} or all")), "{name}: {hint}");
    }
}

#[test]
fn extraction_questions_are_searched_in_the_mode_asked_for() {
    let env = Env::new();
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../eval/extraction");
    let one =
        ["extraction", "--provider", "scripted", "--split", "dev", "--dir", set.to_str().unwrap(), "--sessions", "s01"];
    let lexical = env.json(&one);
    assert_eq!(lexical["retrieval"]["mode"], "lexical", "{lexical}");
    assert!(lexical["retrieval"]["embedding_model"].is_null(), "{lexical}");
    let out = env.run(&[&one[..], &["--search", "fuzzy", "--json"]].concat());
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(3), "invalid_argument"), "{}", stderr(&out));
    // No model installed in this HOME: refused before anything is extracted, naming the fix.
    let out = env.run(&[&one[..], &["--search", "hybrid", "--json"]].concat());
    assert_eq!(error_code(&out), "model_missing", "{}", stderr(&out));
    let Some(model) = model_dir() else { return };
    let args = [&one[..], &["--search", "hybrid", "--json"]].concat();
    let out = env.cmd(&args).env("CAIRN_MODEL_DIR", &model).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let hybrid: Value = serde_json::from_slice(&out.stdout).unwrap();
    let retrieval = &hybrid["retrieval"];
    assert_eq!(retrieval["mode"], "hybrid", "{hybrid}");
    assert!(retrieval["embedding_model"].as_str().unwrap().contains("all-MiniLM-L6-v2"), "{hybrid}");
    // One session alone: every question's session is the only one there is.
    assert_eq!(retrieval["turns_hit_at_1"].as_f64(), Some(1.0), "{hybrid}");
    assert_eq!(retrieval["extracted_hit_at_1"].as_f64(), Some(1.0), "{hybrid}");
    assert_eq!(hybrid["recall"], lexical["recall"], "the search mode does not touch extraction");
}
