//! cairn-tui: `cairn tui`, a terminal interface over the store: a dashboard, search as you
//! type, a memory's detail (revisions, relations, timeline; edit, delete, restore, pin), the
//! conflicts queue and the conversation history. Every read and write is one
//! [`cairn_core::ops::Op`] run through [`Client`], on worker threads ([`worker`]); the state
//! machine ([`app`]) never waits and never touches the terminal, so it is tested key by key,
//! and [`ui`] draws it (snapshot-tested on ratatui's `TestBackend`).
//!
//! Read-only unless started with `--write` (docs/TUI.md): the caller gives a client that
//! opens the database read-only when no daemon runs.

pub mod app;
pub mod text;
pub mod ui;
pub mod worker;

use std::io::{IsTerminal, Stdout, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cairn_client::Client;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};

pub use app::{App, Options};

/// How long the loop waits for a key before looking for answers again: well under a frame.
const POLL: Duration = Duration::from_millis(4);

/// Why the interface could not run.
#[derive(Debug)]
pub enum Error {
    /// Standard input or output is not a terminal.
    NotATerminal,
    Io(std::io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NotATerminal => write!(f, "cairn tui needs a terminal (stdin and stdout); use the CLI in scripts"),
            Error::Io(e) => write!(f, "terminal error: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

type Term = Terminal<CrosstermBackend<Stdout>>;

/// Run the interface until the user quits (or SIGINT/SIGTERM/SIGHUP); the terminal is given
/// back as it was, on a panic too.
pub fn run(client: Client, options: Options) -> Result<(), Error> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::NotATerminal);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    restore_on_panic(Arc::clone(&stop));
    let mut terminal = enter()?;
    let result = event_loop(&mut terminal, &client, options, &stop);
    leave();
    let _ = terminal.show_cursor();
    result
}

fn event_loop(terminal: &mut Term, client: &Client, options: Options, stop: &AtomicBool) -> Result<(), Error> {
    let workers = worker::Workers::start(client)?;
    let mut app = App::new(options);
    let mut dirty = true;
    while !app.quit && !stop.load(Ordering::Relaxed) {
        for request in app.outbox.drain(..) {
            workers.send(request);
        }
        if let Some(app::Effect::Edit { id, content }) = app.effect.take() {
            let edited = edit_in_editor(terminal, id, &content);
            app.edited(id, &content, edited);
            dirty = true;
            continue;
        }
        let mut answered = false;
        while let Ok(response) = workers.answers.try_recv() {
            app.on_response(response);
            answered = true;
        }
        // Only after an answer: while a worker connects (or starts the daemon) it holds the
        // client's lock, and the UI thread must not wait for it.
        if answered {
            app.options.connection = client.connected_to();
            dirty = true;
        }
        if dirty {
            terminal.draw(|frame| ui::draw(frame, &mut app))?;
            dirty = false;
        }
        if event::poll(POLL)? {
            match event::read()? {
                Event::Key(key) if key.kind != KeyEventKind::Release => app.on_key(key),
                Event::Mouse(mouse) => app.on_mouse(mouse),
                _ => {}
            }
            dirty = true;
        }
    }
    Ok(())
}

fn enter() -> Result<Term, Error> {
    enable_raw_mode()?;
    let mut stdout = std::io::stdout();
    if let Err(e) = execute!(stdout, EnterAlternateScreen, EnableMouseCapture) {
        leave();
        return Err(e.into());
    }
    let mut terminal = Terminal::new(CrosstermBackend::new(stdout))?;
    terminal.clear()?;
    Ok(terminal)
}

/// Give the terminal back: cooked mode, the main screen, no mouse reports, the cursor.
fn leave() {
    let _ = disable_raw_mode();
    let mut stdout = std::io::stdout();
    let _ = execute!(stdout, DisableMouseCapture, LeaveAlternateScreen, ratatui::crossterm::cursor::Show);
    let _ = stdout.flush();
}

/// A panic anywhere gives the terminal back before the message is printed; one on a worker
/// thread also ends the loop, which would otherwise go on drawing over a restored terminal.
fn restore_on_panic(stop: Arc<AtomicBool>) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        stop.store(true, Ordering::Relaxed);
        leave();
        previous(info);
    }));
}

/// Leave the screen for `$VISUAL` / `$EDITOR` (else `vi`) on a private temporary file, then
/// come back; the new content, or why there is none.
fn edit_in_editor(terminal: &mut Term, id: i64, content: &str) -> Result<String, String> {
    leave();
    let edited = run_editor(id, content);
    let back = enter_again(terminal);
    match (edited, back) {
        (_, Err(e)) => Err(format!("terminal error: {e}")),
        (edited, Ok(())) => edited,
    }
}

fn enter_again(terminal: &mut Term) -> Result<(), Error> {
    enable_raw_mode()?;
    execute!(std::io::stdout(), EnterAlternateScreen, EnableMouseCapture)?;
    terminal.clear()?;
    Ok(())
}

fn run_editor(id: i64, content: &str) -> Result<String, String> {
    let editor = std::env::var("VISUAL")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .or_else(|| std::env::var("EDITOR").ok().filter(|e| !e.trim().is_empty()))
        .unwrap_or_else(|| "vi".into());
    let path = std::env::temp_dir().join(format!("cairn-memory-{id}-{}.md", std::process::id()));
    write_private(&path, content).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi");
    let status = std::process::Command::new(program).args(words).arg(&path).status();
    let result = match status {
        Ok(s) if s.success() => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
        Ok(s) => Err(format!("{program} exited with {s}")),
        Err(e) => Err(format!("cannot run {program}: {e}")),
    };
    let _ = std::fs::remove_file(&path);
    result
}

/// The memory may be private: only its owner reads the temporary copy.
fn write_private(path: &std::path::Path, content: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(content.as_bytes())
}

#[cfg(test)]
mod tests;
