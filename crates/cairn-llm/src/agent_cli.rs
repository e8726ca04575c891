//! The user's own agent CLI as the model: `claude -p` or `opencode run`, already signed in, on
//! the user's subscription (engram's `conflicts scan --semantic` does the same with
//! `ENGRAM_AGENT_CLI`).
//!
//! The command is `claude` or `opencode` (expanded to engram's invocations, asking for their
//! JSON output so the answer and, for Claude, the token counts are exact), or any command line
//! (shell words). The prompt goes on stdin, or in place of a `{prompt}` argument. stdout is read
//! up to a cap, the whole call has a time limit, and on timeout the child and everything it
//! started are killed.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wait_timeout::ChildExt as _;

use crate::{ChatReply, ChatRequest, LlmError, LlmProvider, Role, Usage, estimate_request_tokens, estimate_tokens};

/// The command when none is configured.
pub const DEFAULT_COMMAND: &str = "claude";
/// The model the `claude` command asks for unless one is configured: engram's choice, the
/// cheapest of the user's quota.
const CLAUDE_DEFAULT_MODEL: &str = "haiku";
/// Most bytes of an answer kept: a chat answer is a few KiB.
const OUTPUT_CAP: usize = 4 * 1024 * 1024;
/// The end of stderr kept for an error message.
const STDERR_TAIL: usize = 2048;
/// What a JSON request adds to the prompt.
const JSON_ONLY: &str = "Answer with one JSON value only: no prose before or after it, no code fence.";

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCliConfig {
    /// `claude`, `opencode`, or a command line; `{prompt}` in an argument takes the prompt.
    pub command: String,
    /// Passed as `--model` to `claude` / `opencode`; a label for other commands.
    pub model: Option<String>,
    pub timeout: Duration,
    /// Where the agent runs (created when missing). Its own session is recorded by its host
    /// under this directory, apart from the user's projects.
    pub workdir: Option<PathBuf>,
}

/// The command line resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Invocation {
    program: String,
    args: Vec<String>,
    /// The prompt replaces `{prompt}` in an argument instead of going on stdin.
    prompt_in_args: bool,
}

#[derive(Debug)]
pub struct AgentCliProvider {
    invocation: Invocation,
    model: String,
    timeout: Duration,
    workdir: Option<PathBuf>,
}

impl AgentCliProvider {
    pub fn new(config: &AgentCliConfig) -> Result<AgentCliProvider, LlmError> {
        let invocation = resolve(&config.command, config.model.as_deref())?;
        let model = match (&config.model, invocation.program.as_str()) {
            (Some(model), _) => model.clone(),
            (None, "claude") if config.command.trim() == "claude" => CLAUDE_DEFAULT_MODEL.to_owned(),
            (None, program) => program_name(program),
        };
        Ok(AgentCliProvider { invocation, model, timeout: config.timeout, workdir: config.workdir.clone() })
    }

    /// The command line as it will run, for `cairn llm status`.
    pub fn command_line(&self) -> String {
        std::iter::once(self.invocation.program.as_str())
            .chain(self.invocation.args.iter().map(String::as_str))
            .map(|w| shlex::try_quote(w).map_or_else(|_| w.to_owned(), std::borrow::Cow::into_owned))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn command(&self, prompt: &str) -> Result<Command, LlmError> {
        let mut command = Command::new(&self.invocation.program);
        for arg in &self.invocation.args {
            command.arg(if self.invocation.prompt_in_args { arg.replace("{prompt}", prompt) } else { arg.clone() });
        }
        command
            .stdin(if self.invocation.prompt_in_args { Stdio::null() } else { Stdio::piped() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &self.workdir {
            std::fs::create_dir_all(dir)
                .map_err(|e| LlmError::Unavailable(format!("cannot create {}: {e}", dir.display())))?;
            command.current_dir(dir);
        }
        // Its own process group: on timeout the agent and whatever it started go together.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        Ok(command)
    }

    fn spawn(&self, prompt: &str) -> Result<Child, LlmError> {
        self.command(prompt)?.spawn().map_err(|e| {
            let program = &self.invocation.program;
            if e.kind() == std::io::ErrorKind::NotFound {
                LlmError::NotConfigured(format!(
                    "`{program}` is not on PATH: install it, or name another command with `cairn llm use agent-cli --command CMD`"
                ))
            } else {
                LlmError::Unavailable(format!("cannot start `{program}`: {e}"))
            }
        })
    }
}

/// `claude` and `opencode` as engram runs them; anything else split into shell words.
fn resolve(command: &str, model: Option<&str>) -> Result<Invocation, LlmError> {
    let words = shlex::split(command.trim()).filter(|w| !w.is_empty()).ok_or_else(|| {
        LlmError::NotConfigured(format!("the agent command {command:?} cannot be read as a command line"))
    })?;
    let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut args = match words.as_slice() {
        [one] if one == "claude" => {
            let mut args = owned(&["-p", "--output-format", "json", "--max-turns", "1", "--model"]);
            args.push(model.unwrap_or(CLAUDE_DEFAULT_MODEL).to_owned());
            args
        }
        [one] if one == "opencode" => {
            let mut args = owned(&["run", "--format", "json"]);
            if let Some(model) = model {
                args.extend(["--model".to_owned(), model.to_owned()]);
            }
            args
        }
        [_, rest @ ..] => rest.to_vec(),
        [] => unreachable!("filtered above"),
    };
    let prompt_in_args = args.iter().any(|a| a.contains("{prompt}"));
    let program = words[0].clone();
    args.shrink_to_fit();
    Ok(Invocation { program, args, prompt_in_args })
}

fn program_name(program: &str) -> String {
    std::path::Path::new(program).file_name().map_or_else(|| program.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// The chat as one prompt: the system text first, then the conversation (labelled only when it
/// has more than one message), then the JSON instruction.
fn render_prompt(request: &ChatRequest) -> String {
    let mut parts: Vec<String> =
        request.messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.clone()).collect();
    let turns: Vec<_> = request.without_prefill().iter().filter(|m| m.role != Role::System).collect();
    if let [only] = turns.as_slice() {
        parts.push(only.content.clone());
    } else {
        for m in turns {
            let who = if m.role == Role::User { "User" } else { "Assistant" };
            parts.push(format!("{who}: {}", m.content));
        }
    }
    if request.json {
        parts.push(JSON_ONLY.to_owned());
    }
    parts.join("\n\n")
}

/// What the agent printed: text, and the counts and model when it says them.
#[derive(Debug, PartialEq)]
struct Printed {
    text: String,
    usage: Option<Usage>,
    model: Option<String>,
}

/// Claude's `--output-format json` envelope (`{"type":"result","result":…,"usage":…}`),
/// OpenCode's `--format json` event lines (the `text` parts joined), or plain text.
fn read_printed(stdout: &str) -> Result<Printed, LlmError> {
    let trimmed = stdout.trim();
    if let Ok(envelope) = serde_json::from_str::<serde_json::Value>(trimmed)
        && envelope.get("type").and_then(|t| t.as_str()) == Some("result")
    {
        let text = envelope["result"].as_str().unwrap_or_default().to_owned();
        if envelope["is_error"].as_bool() == Some(true) {
            let subtype = envelope["subtype"].as_str().unwrap_or("error");
            return Err(LlmError::Unavailable(format!("the agent reported an error ({subtype}): {text}")));
        }
        let count = |field: &str| envelope["usage"][field].as_u64().unwrap_or(0);
        let usage = envelope.get("usage").filter(|u| u.is_object()).map(|_| Usage {
            input_tokens: count("input_tokens")
                + count("cache_creation_input_tokens")
                + count("cache_read_input_tokens"),
            output_tokens: count("output_tokens"),
        });
        let model = envelope["modelUsage"].as_object().and_then(|m| m.keys().next().cloned());
        return Ok(Printed { text, usage, model });
    }
    let events: Option<Vec<serde_json::Value>> =
        trimmed.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).ok()).collect();
    if let Some(events) = events.filter(|e| e.len() > 1 || e.iter().any(|v| v.get("part").is_some())) {
        let text: String = events
            .iter()
            .filter(|e| e["type"] == "text" || e["part"]["type"] == "text")
            .filter_map(|e| e["part"]["text"].as_str().or_else(|| e["text"].as_str()))
            .collect();
        if !text.trim().is_empty() {
            return Ok(Printed { text, usage: None, model: None });
        }
    }
    Ok(Printed { text: trimmed.to_owned(), usage: None, model: None })
}

/// stdout, read whole so the child never blocks on a full pipe, but kept up to `OUTPUT_CAP`.
fn read_capped(mut from: impl Read) -> std::io::Result<(Vec<u8>, bool)> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut overflowed = false;
    loop {
        let n = from.read(&mut chunk)?;
        if n == 0 {
            return Ok((kept, overflowed));
        }
        let room = OUTPUT_CAP.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..n.min(room)]);
        overflowed |= n > room;
    }
}

/// The last `STDERR_TAIL` bytes of stderr (read whole for the same reason).
fn read_tail(mut from: impl Read) -> String {
    let mut all = Vec::new();
    let mut chunk = [0u8; 8 * 1024];
    while let Ok(n) = from.read(&mut chunk) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&chunk[..n]);
        if all.len() > 4 * STDERR_TAIL {
            all.drain(..all.len() - STDERR_TAIL);
        }
    }
    let start = all.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&all[start..]).trim().to_owned()
}

/// The child and everything in its process group, gone.
fn kill(child: &mut Child) {
    #[cfg(unix)]
    {
        let group = format!("-{}", child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl LlmProvider for AgentCliProvider {
    fn kind(&self) -> &'static str {
        "agent-cli"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let prompt = render_prompt(request);
        let deadline = Instant::now() + self.timeout;
        let timed_out = || LlmError::Timeout(self.timeout.as_secs().max(1));
        let mut child = self.spawn(&prompt)?;
        if let Some(mut stdin) = child.stdin.take() {
            let prompt = prompt.clone();
            // A writer of its own: an agent that prints before it has read everything must not
            // deadlock against a full pipe.
            std::thread::spawn(move || {
                let _ = stdin.write_all(prompt.as_bytes());
            });
        }
        let (out_tx, out_rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        std::thread::spawn(move || {
            let _ = out_tx.send(read_capped(stdout));
        });
        let (err_tx, err_rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr is piped");
        std::thread::spawn(move || {
            let _ = err_tx.send(read_tail(stderr));
        });
        let status = match child.wait_timeout(self.timeout) {
            Ok(Some(status)) => status,
            Ok(None) => {
                kill(&mut child);
                return Err(timed_out());
            }
            Err(e) => {
                kill(&mut child);
                return Err(LlmError::Unavailable(format!("waiting for `{}`: {e}", self.invocation.program)));
            }
        };
        // Something it started may still hold stdout open: wait no longer than the call may take.
        let remaining = deadline.saturating_duration_since(Instant::now());
        let Ok(read) = out_rx.recv_timeout(remaining) else {
            kill(&mut child);
            return Err(timed_out());
        };
        let stderr_tail = err_rx.recv_timeout(Duration::from_millis(200)).unwrap_or_default();
        let (bytes, overflowed) =
            read.map_err(|e| LlmError::Unavailable(format!("reading the agent's answer: {e}")))?;
        if !status.success() {
            let said =
                if stderr_tail.is_empty() { String::from_utf8_lossy(&bytes).trim().to_owned() } else { stderr_tail };
            let said: String = said.chars().take(STDERR_TAIL).collect();
            return Err(LlmError::Unavailable(format!("`{}` exited with {status}: {said}", self.invocation.program)));
        }
        if overflowed {
            return Err(LlmError::Malformed(format!("the agent printed more than {OUTPUT_CAP} bytes")));
        }
        let stdout =
            String::from_utf8(bytes).map_err(|_| LlmError::Malformed("the agent printed non-UTF-8 bytes".into()))?;
        let printed = read_printed(&stdout)?;
        if printed.text.trim().is_empty() {
            return Err(LlmError::Malformed(format!("`{}` printed no answer", self.invocation.program)));
        }
        let usage = printed.usage.unwrap_or_else(|| Usage {
            input_tokens: estimate_request_tokens(request).max(estimate_tokens(&prompt)),
            output_tokens: estimate_tokens(&printed.text),
        });
        Ok(ChatReply { text: printed.text, usage, model: printed.model.unwrap_or_else(|| self.model.clone()) })
    }

    /// The program can be found: starting an agent costs a session of the user's quota.
    fn probe(&self) -> Result<(), LlmError> {
        let program = &self.invocation.program;
        if program.contains(std::path::MAIN_SEPARATOR) {
            return if std::path::Path::new(program).is_file() {
                Ok(())
            } else {
                Err(LlmError::NotConfigured(format!("`{program}` does not exist")))
            };
        }
        let on_path = std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()));
        if on_path { Ok(()) } else { Err(LlmError::NotConfigured(format!("`{program}` is not on PATH"))) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChatMessage;

    #[test]
    fn claude_and_opencode_expand_to_their_json_output() {
        let claude = resolve("claude", None).unwrap();
        assert_eq!(claude.program, "claude");
        assert_eq!(claude.args.join(" "), "-p --output-format json --max-turns 1 --model haiku");
        assert!(!claude.prompt_in_args);
        let opencode = resolve("opencode", Some("anthropic/claude-haiku-4-5")).unwrap();
        assert_eq!(opencode.args.join(" "), "run --format json --model anthropic/claude-haiku-4-5");
        let custom = resolve("my-llm --flag 'two words' {prompt}", None).unwrap();
        assert_eq!(custom.args, ["--flag", "two words", "{prompt}"]);
        assert!(custom.prompt_in_args);
        assert!(matches!(resolve("'unclosed", None), Err(LlmError::NotConfigured(_))));
        assert!(matches!(resolve("  ", None), Err(LlmError::NotConfigured(_))));
    }

    #[test]
    fn the_prompt_is_the_system_text_then_the_turns() {
        let request = ChatRequest {
            messages: vec![ChatMessage::system("You extract facts."), ChatMessage::user("Session: …")],
            max_tokens: 100,
            temperature: 0.0,
            json: true,
        };
        assert_eq!(render_prompt(&request), format!("You extract facts.\n\nSession: …\n\n{JSON_ONLY}"));
    }

    #[test]
    fn claude_envelopes_opencode_events_and_plain_text_are_read() {
        let claude = r#"{"type":"result","subtype":"success","is_error":false,"result":"{\"facts\":[]}",
            "usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":7},
            "modelUsage":{"claude-haiku-4-5":{}}}"#;
        let printed = read_printed(claude).unwrap();
        assert_eq!(printed.text, r#"{"facts":[]}"#);
        assert_eq!(printed.usage, Some(Usage { input_tokens: 15, output_tokens: 7 }));
        assert_eq!(printed.model.as_deref(), Some("claude-haiku-4-5"));
        let failed = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":"no credit"}"#;
        assert!(matches!(read_printed(failed), Err(LlmError::Unavailable(m)) if m.contains("no credit")));
        let opencode = "{\"type\":\"step_start\",\"part\":{}}\n{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"{\\\"a\\\":\"}}\n{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"1}\"}}\n";
        assert_eq!(read_printed(opencode).unwrap().text, r#"{"a":1}"#);
        assert_eq!(read_printed("  {\"facts\": []}\n").unwrap().text, r#"{"facts": []}"#, "an answer that is JSON");
        assert_eq!(read_printed("plain words\n").unwrap().text, "plain words");
    }
}
