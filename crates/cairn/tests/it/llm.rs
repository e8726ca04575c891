//! `cairn llm use|status|off` end to end: the binary against a scripted OpenAI-compatible server
//! on loopback, config.toml as a user keeps it, the ledger across processes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::cairn;

/// An OpenAI-compatible server: `GET /v1/models`, and `POST /v1/chat/completions` answering
/// "ok" with 600 tokens in and 500 out. Records the paths it was asked for.
struct FakeOpenAi {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl FakeOpenAi {
    fn start() -> FakeOpenAi {
        let (addr, seen) = crate::support::openai_server("qwen2.5:1.5b", (600, 500), |_| "ok".to_owned());
        FakeOpenAi { addr, seen }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn chats(&self) -> usize {
        self.seen.lock().unwrap().iter().filter(|p| *p == "POST /v1/chat/completions").count()
    }

    fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

struct Env {
    dir: tempfile::TempDir,
    /// Set on every command (`CAIRN_LLM_WORKER`).
    vars: Vec<(&'static str, String)>,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        Env { dir, vars: Vec::new() }
    }

    fn with_var(mut self, var: &'static str, value: impl Into<String>) -> Env {
        self.vars.push((var, value.into()));
        self
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn config(&self) -> PathBuf {
        self.data().join("config.toml")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = cairn();
        cmd.args(args).env("CAIRN_DATA_DIR", self.data()).current_dir(self.dir.path()).stdin(Stdio::null());
        for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CAIRN_TEST_LLM_KEY"] {
            cmd.env_remove(var);
        }
        for (var, _) in cairn_core::settings::LLM_ENV_VARS {
            cmd.env_remove(var);
        }
        cmd.env_remove(cairn_llm::worker::WORKER_ENV);
        cmd.envs(self.vars.iter().map(|(var, value)| (var, value)));
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.ok(&[args, &["--json"]].concat());
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// stdout and stderr for a snapshot, the data dir named.
    fn transcript(&self, out: &Output) -> String {
        let text =
            format!("{}--- stderr\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        text.replace(&self.data().display().to_string(), "[DATA]")
    }
}

/// A snapshot with the fake's port and today's date named.
macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (r"127\.0\.0\.1:[0-9]+", "127.0.0.1:[PORT]"),
            (r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z", "[TIME]"),
            (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "[DAY]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

fn error_code(out: &Output) -> String {
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    value["error"]["code"].as_str().unwrap_or_default().to_owned()
}

fn llm_check(doctor: &Value) -> Value {
    doctor["checks"].as_array().unwrap().iter().find(|c| c["id"] == "llm").cloned().expect("an llm check")
}

/// Off by default; `use openai` writes `[llm]` keeping the file; `status` reaches the server
/// without spending, `--check` spends and counts; the budget stops the next call before it is
/// sent; `off` turns it off.
#[test]
fn llm_use_status_and_off_end_to_end() {
    let env = Env::new();
    let fake = FakeOpenAi::start();
    std::fs::write(env.config(), "# my settings\nport = 7999\n\n[inject]\nmax_relevant = 3\n").unwrap();
    let out = env.ok(&["llm", "status"]);
    snap!("llm_status_off", env.transcript(&out));
    let off = env.json(&["llm", "status"]);
    assert_eq!((off["provider"].as_str(), off["reachable"].as_null()), (Some("off"), Some(())));
    assert!(!env.data().join("llm-usage.db").exists(), "a look writes nothing");

    let base_url = fake.base_url();
    let out = env.ok(&[
        "llm",
        "use",
        "openai",
        "--base-url",
        &base_url,
        "--model",
        "qwen2.5:1.5b",
        "--daily-token-budget",
        "1000",
    ]);
    snap!("llm_use_openai", env.transcript(&out));
    let written = std::fs::read_to_string(env.config()).unwrap();
    assert!(written.starts_with("# my settings\nport = 7999\n\n[inject]\nmax_relevant = 3\n"), "{written}");
    assert!(written.contains(&format!("[llm]\nprovider = \"openai\"\nmodel = \"qwen2.5:1.5b\"\nbase_url = \"{base_url}\"\ndaily_token_budget = 1000\n")), "{written}");
    assert!(!written.contains("api_key"), "a server on loopback needs no key: {written}");
    assert_eq!(fake.requests(), 0, "use sends nothing");

    let status = env.json(&["llm", "status"]);
    assert_eq!((status["reachable"].as_bool(), fake.chats(), fake.requests()), (Some(true), 0, 1), "{status}");
    insta::assert_json_snapshot!("llm_status_openai_json", status, {
        ".base_url" => "[URL]",
        ".today.day" => "[DAY]",
    });
    let config = env.json(&["config"]);
    assert_eq!(config["llm"]["provider"], json!({"value": "openai", "source": {"kind": "config_file"}}));

    let out = env.ok(&["llm", "status", "--check"]);
    snap!("llm_status_check", env.transcript(&out));
    assert_eq!(fake.chats(), 1);
    let doctor = env.json(&["doctor"]);
    let check = llm_check(&doctor);
    assert_eq!(check["status"], "warning", "{check}");
    assert_eq!(
        check["message"],
        "openai qwen2.5:1.5b: 1100 of 1000 tokens spent today: the budget is spent, extraction waits for tomorrow (UTC)"
    );

    // The budget is spent: the next call is refused before anything is sent, and said so.
    let out = env.run(&["llm", "status", "--check", "--json"]);
    assert_eq!(
        (out.status.code(), error_code(&out).as_str()),
        (Some(1), "llm_budget_spent"),
        "{}",
        env.transcript(&out)
    );
    assert_eq!(fake.chats(), 1, "nothing sent past the budget");
    let status = env.json(&["llm", "status"]);
    assert_eq!(
        (status["today"]["remote_tokens"].as_u64(), status["today"]["remaining"].as_u64()),
        (Some(1100), Some(0))
    );
    assert_eq!(status["last_failure"]["kind"], "budget_spent", "{status}");

    let out = env.ok(&["llm", "off"]);
    snap!("llm_off", env.transcript(&out));
    let written = std::fs::read_to_string(env.config()).unwrap();
    assert!(written.contains("[llm]\nprovider = \"off\"\n") && written.starts_with("# my settings\n"), "{written}");
    assert_eq!(env.json(&["llm", "status"])["provider"], "off");
    assert_eq!(llm_check(&env.json(&["doctor"]))["status"], "ok");
}

/// A key variable named but not set: `use` warns, nothing is ever sent, and the error names it.
#[test]
fn without_its_key_the_provider_sends_nothing() {
    let env = Env::new();
    let fake = FakeOpenAi::start();
    let out = env.ok(&[
        "llm",
        "use",
        "openai",
        "--base-url",
        &fake.base_url(),
        "--model",
        "m",
        "--api-key-env",
        "CAIRN_TEST_LLM_KEY",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAIRN_TEST_LLM_KEY is not set in this shell"));
    let status = env.json(&["llm", "status"]);
    assert_eq!((status["reachable"].as_bool(), status["api_key_set"].as_bool()), (Some(false), Some(false)));
    assert!(status["problem"].as_str().unwrap().contains("CAIRN_TEST_LLM_KEY is not set"), "{status}");
    let out = env.run(&["llm", "status", "--check", "--json"]);
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(6), "llm_not_configured"));
    assert_eq!(llm_check(&env.json(&["doctor"]))["status"], "warning");
    assert_eq!(fake.requests(), 0, "the server saw nothing");
    // With the key in the environment the same settings reach it, with the key.
    let out = env.cmd(&["llm", "status", "--check"]).env("CAIRN_TEST_LLM_KEY", "sk-test").output().unwrap();
    assert!(out.status.success(), "{}", env.transcript(&out));
    assert_eq!(fake.chats(), 1);
}

/// Bad input is refused with a clear code and nothing written; a key pasted where its
/// variable's name belongs is never repeated.
#[test]
fn bad_choices_are_refused_and_write_nothing() {
    let env = Env::new();
    std::fs::write(env.config(), "# kept\n").unwrap();
    for (args, code) in [
        (vec!["llm", "use", "openai", "--base-url", "localhost:11434", "--model", "m"], "invalid_argument"),
        (vec!["llm", "use", "openai", "--base-url", "http://localhost:1/v1", "--model", " "], "empty_field"),
        (vec!["llm", "use", "anthropic", "--model", "m", "--api-key-env", "sk-ant-secret123"], "invalid_argument"),
    ] {
        let out = env.run(&[args.as_slice(), &["--json"]].concat());
        assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(3), code), "{args:?}");
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!said.contains("secret123"), "{said}");
    }
    assert_eq!(std::fs::read_to_string(env.config()).unwrap(), "# kept\n");
}

/// A mistake in `[llm]` turns only the LLM off: the rest of cairn runs, and status, config and
/// doctor say why.
#[test]
fn a_broken_llm_table_turns_only_the_llm_off() {
    let env = Env::new();
    std::fs::write(env.config(), "[llm]\nprovider = \"gpt\"\n").unwrap();
    env.ok(&["save", "still works", "the store does not care about [llm]"]);
    let status = env.json(&["llm", "status"]);
    assert_eq!(status["provider"], "off");
    assert!(status["problem"].as_str().unwrap().contains("\"gpt\" is not a provider"), "{status}");
    let out = env.ok(&["config"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("problem: [llm] provider = \"gpt\" is not a provider"));
    let check = llm_check(&env.json(&["doctor"]));
    assert_eq!(check["status"], "warning", "{check}");
    let out = env.run(&["llm", "status", "--check", "--json"]);
    assert_eq!(error_code(&out), "llm_not_configured");
}

/// The user's agent CLI: a script standing in for `claude -p` answers a check.
#[cfg(unix)]
#[test]
fn an_agent_cli_answers_a_check() {
    let env = Env::new();
    let agent = env.dir.path().join("fake-agent");
    std::fs::write(&agent, "#!/bin/sh\ncat > /dev/null\necho ok\n").unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let command = format!("'{}'", agent.display());
    env.ok(&["llm", "use", "agent-cli", "--command", &command]);
    let status = env.json(&["llm", "status", "--check"]);
    assert_eq!((status["check"]["answer"].as_str(), status["reachable"].as_bool()), (Some("ok"), Some(true)));
    assert_eq!(status["model"], "fake-agent");
    assert!(status["today"]["remote_tokens"].as_u64().unwrap() > 0, "estimated and counted: {status}");
    assert!(Path::new(&env.data().join("llm-agent-cli")).is_dir(), "the agent ran in its own directory");
}

/// `use local --from` a file that is not the model: refused by its checksum, nothing chosen.
#[test]
fn a_local_model_file_that_fails_its_checksum_is_refused() {
    let env = Env::new();
    let bogus = env.dir.path().join("model.gguf");
    std::fs::write(&bogus, b"GGUF not really").unwrap();
    let out = env.run(&["llm", "use", "local", "--from", bogus.to_str().unwrap(), "--json"]);
    assert_eq!(
        (out.status.code(), error_code(&out).as_str()),
        (Some(1), "checksum_mismatch"),
        "{}",
        env.transcript(&out)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--from FILE"), "the error names the fix: {said}");
    assert!(!env.config().exists(), "nothing chosen");
    assert_eq!(env.json(&["llm", "status"])["provider"], "off");
}

/// The local model as the default `cairn` runs it: in `cairn-llm-worker` (the real binary cargo
/// built beside this one, named by `CAIRN_LLM_WORKER` because the tests' `cairn` could also run
/// it in-process), installed from the test copy of SmolLM2, checked with one real call.
#[test]
fn the_local_model_answers_from_its_worker_process() {
    let Some(file) = crate::extract::test_model("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    let Some(worker) = worker_bin() else { return };
    let env = Env::new().with_var(cairn_llm::worker::WORKER_ENV, worker.display().to_string());
    env.ok(&["llm", "use", "local", "--model", "smollm2-135m-instruct", "--from", file.to_str().unwrap()]);
    let status = env.json(&["llm", "status", "--check"]);
    assert_eq!((status["check"]["ok"].as_bool(), status["reachable"].as_bool()), (Some(true), Some(true)), "{status}");
    assert!(!status["check"]["answer"].as_str().unwrap_or_default().is_empty(), "the model said something: {status}");
    assert_eq!(status["local"]["runs_in"], worker.display().to_string());
    assert!(status["today"]["local_tokens"].as_u64().unwrap() > 0, "the call was metered: {status}");
    let text = String::from_utf8_lossy(&env.ok(&["llm", "status"]).stdout).into_owned();
    assert!(text.contains("runs in") && text.contains("cairn-llm-worker"), "{text}");
}

/// A local model whose worker is not there: chosen and installed all the same, with the build
/// command said at once, in `status`, in `doctor`, and as the error of a call.
#[test]
fn a_local_model_without_its_worker_names_how_to_build_it() {
    let Some(file) = crate::extract::test_model("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    let env = Env::new().with_var(cairn_llm::worker::WORKER_ENV, "/nonexistent/cairn-llm-worker");
    let out = env.ok(&["llm", "use", "local", "--model", "smollm2-135m-instruct", "--from", file.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("CAIRN_LLM_WORKER names /nonexistent/cairn-llm-worker, which is not a file"), "{said}");
    let status = env.json(&["llm", "status"]);
    assert_eq!(status["reachable"], false, "{status}");
    assert!(status["problem"].as_str().unwrap().contains("not a file"), "{status}");
    let out = env.run(&["llm", "status", "--check", "--json"]);
    assert_eq!(
        (out.status.code(), error_code(&out).as_str()),
        (Some(6), "llm_not_configured"),
        "{}",
        env.transcript(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("not a file"), "{}", env.transcript(&out));
}

/// `cairn-llm-worker` beside the `cairn` under test, when this build made it (the workspace's
/// tests do: cairn-llm's own tests run it); required where `CAIRN_REQUIRE_LLM=1`.
fn worker_bin() -> Option<PathBuf> {
    let cairn = PathBuf::from(env!("CARGO_BIN_EXE_cairn"));
    let worker = cairn.with_file_name(format!("{}{}", cairn_llm::worker::WORKER_NAME, std::env::consts::EXE_SUFFIX));
    if worker.is_file() {
        return Some(worker);
    }
    assert!(
        std::env::var_os("CAIRN_REQUIRE_LLM").is_none(),
        "CAIRN_REQUIRE_LLM is set but {} was not built (cargo nextest run --workspace builds it)",
        worker.display()
    );
    eprintln!("skipped: no {} (build the workspace's tests)", worker.display());
    None
}
