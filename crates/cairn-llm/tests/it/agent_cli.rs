//! The agent-CLI provider against small shell scripts standing in for `claude -p`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_llm::agent_cli::{AgentCliConfig, AgentCliProvider};
use cairn_llm::{ChatMessage, ChatRequest, LlmError, LlmProvider, Usage};

/// An executable script `name` in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

fn provider(command: String, timeout: Duration, workdir: Option<PathBuf>) -> AgentCliProvider {
    AgentCliProvider::new(&AgentCliConfig { command, model: None, timeout, workdir }).unwrap()
}

fn quoted(path: &Path) -> String {
    format!("'{}'", path.display())
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::system("Extract facts."), ChatMessage::user("We chose SQLite.")],
        max_tokens: 100,
        temperature: 0.0,
        json: false,
    }
}

#[test]
fn the_prompt_goes_on_stdin_and_the_answer_comes_from_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let echo = script(tmp.path(), "echo-agent", "cat; pwd > \"$0.cwd\"");
    let workdir = tmp.path().join("agent-home");
    let agent = provider(quoted(&echo), Duration::from_secs(20), Some(workdir.clone()));
    let reply = agent.chat(&request()).unwrap();
    assert_eq!(reply.text, "Extract facts.\n\nWe chose SQLite.");
    assert_eq!(reply.usage, Usage { input_tokens: 8, output_tokens: 8 }, "estimated from the text: 32 bytes each way");
    assert_eq!(reply.model, "echo-agent");
    let cwd = std::fs::read_to_string(tmp.path().join("echo-agent.cwd")).unwrap();
    assert_eq!(
        Path::new(cwd.trim()).canonicalize().unwrap(),
        workdir.canonicalize().unwrap(),
        "runs in its own directory"
    );
}

#[test]
fn the_prompt_can_be_an_argument_and_claudes_envelope_gives_exact_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let arg = script(tmp.path(), "arg-agent", "printf '%s' \"$1\" | tr a-z A-Z");
    let reply =
        provider(format!("{} {{prompt}}", quoted(&arg)), Duration::from_secs(20), None).chat(&request()).unwrap();
    assert_eq!(reply.text, "EXTRACT FACTS.\n\nWE CHOSE SQLITE.");
    let claude = script(
        tmp.path(),
        "claude-like",
        r#"cat > /dev/null; printf '%s' '{"type":"result","subtype":"success","is_error":false,"result":"{\"facts\":[]}","usage":{"input_tokens":50,"cache_read_input_tokens":10,"output_tokens":5},"modelUsage":{"claude-haiku-4-5":{}}}'"#,
    );
    let reply = provider(quoted(&claude), Duration::from_secs(20), None).chat(&request()).unwrap();
    assert_eq!((reply.text.as_str(), reply.usage), ("{\"facts\":[]}", Usage { input_tokens: 60, output_tokens: 5 }));
    assert_eq!(reply.model, "claude-haiku-4-5");
}

#[test]
fn a_slow_agent_is_killed_with_what_it_started() {
    let tmp = tempfile::tempdir().unwrap();
    let pids = tmp.path().join("pids");
    let slow = script(tmp.path(), "slow-agent", &format!("sleep 60 & echo $! > '{}'; wait", pids.display()));
    let err = provider(quoted(&slow), Duration::from_millis(700), None).chat(&request()).unwrap_err();
    assert!(matches!(err, LlmError::Timeout(_)), "{err}");
    assert!(err.retryable());
    let grandchild = std::fs::read_to_string(&pids).unwrap().trim().to_owned();
    // Killed with its group; init reaps it at its own pace, so wait for that (a zombie is dead).
    let gone = || match std::fs::read_to_string(format!("/proc/{grandchild}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone() {
        assert!(Instant::now() < deadline, "the agent's child {grandchild} survived the timeout");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn failures_say_what_happened() {
    let tmp = tempfile::tempdir().unwrap();
    let failing = script(tmp.path(), "failing-agent", "cat > /dev/null; echo 'not logged in' >&2; exit 3");
    let err = provider(quoted(&failing), Duration::from_secs(20), None).chat(&request()).unwrap_err();
    assert!(matches!(&err, LlmError::Unavailable(m) if m.contains("not logged in")), "{err}");
    let err =
        provider("cairn-test-no-such-agent -p".into(), Duration::from_secs(20), None).chat(&request()).unwrap_err();
    assert!(matches!(&err, LlmError::NotConfigured(m) if m.contains("cairn-test-no-such-agent")), "{err}");
    assert!(!err.retryable());
    let silent = script(tmp.path(), "silent-agent", "cat > /dev/null");
    assert!(matches!(
        provider(quoted(&silent), Duration::from_secs(20), None).chat(&request()),
        Err(LlmError::Malformed(_))
    ));
    let flood = script(tmp.path(), "flood-agent", "cat > /dev/null; head -c 5000000 /dev/zero | tr '\\0' x");
    let err = provider(quoted(&flood), Duration::from_secs(30), None).chat(&request()).unwrap_err();
    assert!(matches!(&err, LlmError::Malformed(m) if m.contains("more than")), "{err}");
}
