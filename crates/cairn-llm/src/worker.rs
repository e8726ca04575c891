//! The local model in a process of its own: `cairn-llm-worker`.
//!
//! Why: candle's kernels are a sixth of a cold build of the `cairn` binary, and the LLM is off
//! until the user picks one. So the default binary carries no forward pass; when `[llm]` names
//! the local model, the daemon starts the worker (built next to it by `scripts/start`, or on
//! `PATH`) and talks to it over its stdin and stdout, one JSON line a message. The model's
//! gigabytes then live in the worker, not in the daemon, and a crash of the forward pass cannot
//! take the daemon down with it.
//!
//! The wire, one line each way a call:
//! - the worker's first line: `{"ready":{"model":NAME}}`, or `{"error":{...}}` and it exits (a
//!   model file that is missing, truncated or not a model);
//! - then each request is a `ChatRequest` as JSON, answered by `{"reply":{...}}` or
//!   `{"error":{"kind":...}}` (the port's `LlmError`, kind by kind).
//!
//! The worker ends when its stdin closes, so a daemon that is killed leaves no model behind.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::local::LocalModelSpec;
use crate::{ChatReply, ChatRequest, LlmError, LlmProvider, Usage};

/// The worker's executable name.
pub const WORKER_NAME: &str = "cairn-llm-worker";

/// An explicit worker to run (a path). Set, it is used even by a build that could run the model
/// in-process: how the tests drive the worker a user's daemon runs.
pub const WORKER_ENV: &str = "CAIRN_LLM_WORKER";

/// How a user gets the worker when it is missing (the message names it).
pub const BUILD_HINT: &str = "in a checkout, scripts/start builds it when [llm] names the local model \
     (or: cargo build --release --locked -p cairn-llm --features local --bin cairn-llm-worker); \
     for an installed cairn: cargo install --locked --path crates/cairn-llm --features local";

/// One line from the worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerLine {
    Ready { model: String },
    Reply { text: String, usage: Usage, model: String },
    Error(WireError),
}

/// `LlmError` on the wire, kind by kind, so the daemon retries what it would retry in-process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WireError {
    Unavailable { message: String },
    Timeout { secs: u64 },
    Malformed { message: String },
    Refused { message: String },
    NotConfigured { message: String },
    BudgetSpent { spent: u64, budget: u64 },
    ModelFile { message: String },
    ContextFull { tokens: usize, limit: usize },
}

impl From<LlmError> for WireError {
    fn from(error: LlmError) -> Self {
        match error {
            LlmError::Unavailable(message) => Self::Unavailable { message },
            LlmError::Timeout(secs) => Self::Timeout { secs },
            LlmError::Malformed(message) => Self::Malformed { message },
            LlmError::Refused(message) => Self::Refused { message },
            LlmError::NotConfigured(message) => Self::NotConfigured { message },
            LlmError::BudgetSpent { spent, budget } => Self::BudgetSpent { spent, budget },
            LlmError::ModelFile(message) => Self::ModelFile { message },
            LlmError::ContextFull { tokens, limit } => Self::ContextFull { tokens, limit },
        }
    }
}

impl From<WireError> for LlmError {
    fn from(error: WireError) -> Self {
        match error {
            WireError::Unavailable { message } => Self::Unavailable(message),
            WireError::Timeout { secs } => Self::Timeout(secs),
            WireError::Malformed { message } => Self::Malformed(message),
            WireError::Refused { message } => Self::Refused(message),
            WireError::NotConfigured { message } => Self::NotConfigured(message),
            WireError::BudgetSpent { spent, budget } => Self::BudgetSpent { spent, budget },
            WireError::ModelFile { message } => Self::ModelFile(message),
            WireError::ContextFull { tokens, limit } => Self::ContextFull { tokens, limit },
        }
    }
}

/// The worker to run: `CAIRN_LLM_WORKER` when set (through `env`), else `cairn-llm-worker` next
/// to this executable (where cargo and `scripts/start` put it), else the first on `PATH`; or why
/// there is none, with how to build it.
pub fn locate(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    if let Some(path) = env(WORKER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{WORKER_ENV} names {}, which is not a file", path.display()))
        };
    }
    let file = format!("{WORKER_NAME}{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join(&file)));
    beside
        .filter(|path| path.is_file())
        .or_else(|| std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(&file)).find(|p| p.is_file()))
        .ok_or_else(|| {
            format!(
                "the local model runs in {WORKER_NAME}, which is neither beside this cairn nor on PATH; {BUILD_HINT}"
            )
        })
}

/// The local model run by a worker process. Calls run one at a time, as in-process (the
/// model's cache is one sequence); a worker that dies is started again at the next call.
pub struct WorkerProvider {
    exe: PathBuf,
    model_file: PathBuf,
    name: String,
    running: Mutex<Option<Running>>,
}

impl std::fmt::Debug for WorkerProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerProvider").field("exe", &self.exe).field("name", &self.name).finish_non_exhaustive()
    }
}

/// A started worker. Dropped, it is killed and reaped: no model outlives its provider.
struct Running {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl WorkerProvider {
    /// Start `exe` on the installed model at `model_file` and wait until it has loaded it, so a
    /// file that is not the model fails here as it does in-process.
    pub fn open(exe: &Path, model_file: &Path, spec: &LocalModelSpec) -> Result<Self, LlmError> {
        let provider = Self {
            exe: exe.to_owned(),
            model_file: model_file.to_owned(),
            name: spec.name.to_owned(),
            running: Mutex::new(None),
        };
        *provider.lock() = Some(provider.start()?);
        Ok(provider)
    }

    /// The running worker's process id (the tests kill it, as an out-of-memory kill would).
    #[doc(hidden)]
    pub fn worker_pid(&self) -> Option<u32> {
        self.lock().as_ref().map(|running| running.child.id())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn start(&self) -> Result<Running, LlmError> {
        let mut child = Command::new(&self.exe)
            .arg("--model")
            .arg(&self.name)
            .arg("--file")
            .arg(&self.model_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                LlmError::NotConfigured(format!(
                    "the local model runs in {WORKER_NAME}, and {} cannot be started: {e}; {BUILD_HINT}",
                    self.exe.display()
                ))
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(LlmError::Unavailable(format!("{WORKER_NAME} started without its pipes")));
        };
        let mut running = Running { child, stdin, stdout: BufReader::new(stdout) };
        match running.read_line()? {
            WorkerLine::Ready { .. } => Ok(running),
            WorkerLine::Error(error) => Err(error.into()),
            WorkerLine::Reply { .. } => Err(LlmError::Malformed(format!("{WORKER_NAME} answered before it was asked"))),
        }
    }
}

impl Running {
    fn read_line(&mut self) -> Result<WorkerLine, LlmError> {
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line);
        if matches!(read, Ok(0) | Err(_)) {
            let status = self.child.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
            return Err(LlmError::Unavailable(format!("{WORKER_NAME} stopped ({status})")));
        }
        serde_json::from_str(&line)
            .map_err(|e| LlmError::Malformed(format!("{WORKER_NAME} wrote a line cairn cannot read: {e}")))
    }

    fn call(&mut self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let mut line = serde_json::to_string(request).map_err(|e| LlmError::Malformed(e.to_string()))?;
        line.push('\n');
        if let Err(e) = self.stdin.write_all(line.as_bytes()).and_then(|()| self.stdin.flush()) {
            return Err(LlmError::Unavailable(format!("{WORKER_NAME} does not read its input: {e}")));
        }
        match self.read_line()? {
            WorkerLine::Reply { text, usage, model } => Ok(ChatReply { text, usage, model }),
            WorkerLine::Error(error) => Err(error.into()),
            WorkerLine::Ready { .. } => Err(LlmError::Malformed(format!("{WORKER_NAME} said ready twice"))),
        }
    }
}

impl LlmProvider for WorkerProvider {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn model(&self) -> &str {
        &self.name
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let mut running = self.lock();
        if running.is_none() {
            *running = Some(self.start()?);
        }
        let Some(worker) = running.as_mut() else { unreachable!("started just above") };
        let answer = worker.call(request);
        // A worker that stopped or wrote nonsense is not trusted with the next call.
        if matches!(answer, Err(LlmError::Unavailable(_) | LlmError::Malformed(_))) {
            *running = None;
        }
        answer
    }
}

/// The worker's side: load `spec` from `model_file`, say ready, then answer each request line
/// until `input` ends. A model that cannot be loaded is reported as the one line, and an error.
#[cfg(feature = "local")]
pub fn serve(
    spec: &LocalModelSpec,
    model_file: &Path,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), LlmError> {
    let provider = match crate::local::LocalProvider::open(model_file, spec) {
        Ok(provider) => provider,
        Err(error) => {
            let text = error.to_string();
            let _ = write_line(&mut output, &WorkerLine::Error(error.into()));
            return Err(LlmError::ModelFile(text));
        }
    };
    write_line(&mut output, &WorkerLine::Ready { model: spec.name.to_owned() })?;
    for line in input.lines() {
        let line = line.map_err(|e| LlmError::Unavailable(format!("stdin: {e}")))?;
        let answer = match serde_json::from_str::<ChatRequest>(&line) {
            Ok(request) => match provider.chat(&request) {
                Ok(reply) => WorkerLine::Reply { text: reply.text, usage: reply.usage, model: reply.model },
                Err(error) => WorkerLine::Error(error.into()),
            },
            Err(e) => WorkerLine::Error(WireError::Malformed { message: format!("a request cairn cannot read: {e}") }),
        };
        write_line(&mut output, &answer)?;
    }
    Ok(())
}

#[cfg(feature = "local")]
fn write_line(output: &mut impl Write, line: &WorkerLine) -> Result<(), LlmError> {
    let mut text = serde_json::to_string(line).map_err(|e| LlmError::Malformed(e.to_string()))?;
    text.push('\n');
    output
        .write_all(text.as_bytes())
        .and_then(|()| output.flush())
        .map_err(|e| LlmError::Unavailable(format!("stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_kind_crosses_the_wire_as_itself() {
        let errors = [
            LlmError::Unavailable("down".into()),
            LlmError::Timeout(7),
            LlmError::Malformed("junk".into()),
            LlmError::Refused("no".into()),
            LlmError::NotConfigured("key".into()),
            LlmError::BudgetSpent { spent: 3, budget: 2 },
            LlmError::ModelFile("short".into()),
            LlmError::ContextFull { tokens: 9000, limit: 8192 },
        ];
        for error in errors {
            let before = error.to_string();
            let retryable = error.retryable();
            let line = serde_json::to_string(&WorkerLine::Error(error.into())).unwrap();
            let WorkerLine::Error(wire) = serde_json::from_str(&line).unwrap() else { panic!("{line}") };
            let after = LlmError::from(wire);
            assert_eq!((after.to_string(), after.retryable()), (before, retryable), "{line}");
        }
    }

    #[test]
    fn an_explicit_worker_is_the_one_run_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let worker = dir.path().join(WORKER_NAME);
        std::fs::write(&worker, b"").unwrap();
        let named = worker.display().to_string();
        assert_eq!(locate(&|name| (name == WORKER_ENV).then(|| named.clone())), Ok(worker));
        let missing = locate(&|name| (name == WORKER_ENV).then(|| "/nonexistent/cairn-llm-worker".to_owned()));
        assert_eq!(missing, Err(format!("{WORKER_ENV} names /nonexistent/cairn-llm-worker, which is not a file")));
    }

    #[test]
    fn a_worker_that_cannot_start_names_how_to_build_it() {
        let spec = crate::local::default_model();
        let error = WorkerProvider::open(Path::new("/nonexistent/cairn-llm-worker"), Path::new("/x.gguf"), spec)
            .expect_err("nothing to start");
        assert!(matches!(error, LlmError::NotConfigured(_)), "{error:?}");
        assert!(error.to_string().contains("cargo build --release --locked -p cairn-llm"), "{error}");
    }
}
