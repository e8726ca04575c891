//! How each host is wired to cairn, for `cairn doctor`: one [`Wiring`] per host installed in
//! this HOME, made of the [`Piece`]s `cairn setup` puts there (the MCP server entry, the
//! hooks or plugin, the instructions file), each found, missing, or pointing elsewhere. It
//! reads the host's files and never changes them.

use std::path::{Path, PathBuf};

use cairn_core::doctor::{Check, CheckStatus};
use serde::Serialize;

/// One thing setup puts in a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Piece {
    /// `mcp`, `hooks`, `plugin` or `instructions`.
    pub item: &'static str,
    pub path: PathBuf,
    pub state: PieceState,
    /// The cairn binary it runs (the MCP entry, the hooks, the plugin).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// Hooks: of the events setup wires, how many run cairn's hook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Events>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Events {
    pub found: usize,
    pub wanted: usize,
}

/// What became of a piece since setup wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PieceState {
    /// Not there (never set up, or removed).
    Missing,
    /// There, running the binary `cairn doctor` runs.
    ThisBinary,
    /// There, running another cairn that exists.
    OtherBinary,
    /// There, running a cairn that is not there any more.
    StaleBinary,
    /// Hooks: some of setup's events, not all.
    Partial,
    /// An instructions file with cairn's current text.
    Present,
    /// An instructions file with an older text of cairn's.
    Outdated,
}

impl Piece {
    /// A piece that runs `binary` (`None`: not there), judged against the running binary.
    pub fn running(item: &'static str, path: &Path, binary: Option<String>, running: &Path) -> Piece {
        let state = match &binary {
            None => PieceState::Missing,
            Some(b) if !Path::new(b).is_file() => PieceState::StaleBinary,
            Some(b) if std::fs::canonicalize(b).is_ok_and(|p| p == running) => PieceState::ThisBinary,
            Some(_) => PieceState::OtherBinary,
        };
        Piece { item, path: path.to_path_buf(), state, binary, events: None }
    }

    /// Hooks: `found` of `wanted` events run cairn's hook, the first of them `binary`.
    pub fn hooks(path: &Path, binary: Option<String>, found: usize, wanted: usize, running: &Path) -> Piece {
        let mut piece = Piece::running("hooks", path, binary, running);
        if found > 0 && found < wanted && piece.state != PieceState::StaleBinary {
            piece.state = PieceState::Partial;
        }
        piece.events = Some(Events { found, wanted });
        piece
    }

    /// An instructions file: `current` is whether it holds the text setup writes today, `None`
    /// when cairn's text is not in it at all.
    pub fn instructions(path: &Path, current: Option<bool>) -> Piece {
        let state = match current {
            None => PieceState::Missing,
            Some(true) => PieceState::Present,
            Some(false) => PieceState::Outdated,
        };
        Piece { item: "instructions", path: path.to_path_buf(), state, binary: None, events: None }
    }

    /// `hooks 5 of 7`, `mcp`, `instructions (outdated)`: how the check's line names it.
    fn label(&self) -> String {
        match (self.state, self.events) {
            (PieceState::Missing, _) => format!("no {}", self.item),
            (_, Some(e)) => format!("{} {} of {}", self.item, e.found, e.wanted),
            (PieceState::Outdated, _) => format!("{} (outdated)", self.item),
            _ => self.item.to_owned(),
        }
    }
}

/// How one host is wired to cairn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wiring {
    pub agent: &'static str,
    pub pieces: Vec<Piece>,
}

impl Wiring {
    pub fn new(agent: &'static str, pieces: Vec<Piece>) -> Wiring {
        Wiring { agent, pieces }
    }

    /// The cairn binaries the host's config runs, each once.
    pub fn binaries(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.pieces.iter().filter_map(|p| p.binary.as_deref()).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The doctor check, one line: ok when every piece is in place and runs a binary that
    /// exists (or when none is: the host is installed, not connected), a warning for a stale
    /// binary or a host set up only in part.
    pub fn check(&self) -> Check {
        let id = format!("setup.{}", self.agent);
        let setup = format!("cairn setup {}", self.agent);
        let all_missing = self.pieces.iter().all(|p| p.state == PieceState::Missing);
        let stale: Vec<&str> = self
            .pieces
            .iter()
            .filter(|p| p.state == PieceState::StaleBinary)
            .filter_map(|p| p.binary.as_deref())
            .collect();
        let labels: Vec<String> = self.pieces.iter().map(Piece::label).collect();
        let (status, message, hint) = if all_missing {
            (CheckStatus::Ok, "installed, not connected to cairn".to_owned(), Some(setup))
        } else if !stale.is_empty() {
            let mut stale = stale;
            stale.dedup();
            (
                CheckStatus::Warning,
                format!("runs a cairn that is not there any more: {}", stale.join(", ")),
                Some(format!("{setup} (points it at this binary)")),
            )
        } else if self
            .pieces
            .iter()
            .any(|p| matches!(p.state, PieceState::Missing | PieceState::Partial | PieceState::Outdated))
        {
            (
                CheckStatus::Warning,
                format!("set up in part: {}", labels.join(", ")),
                Some(format!("{setup} (puts the rest in place)")),
            )
        } else {
            let binaries = self.binaries();
            let which = if self.pieces.iter().any(|p| p.state == PieceState::ThisBinary) {
                "this binary"
            } else {
                "another binary"
            };
            (CheckStatus::Ok, format!("connected ({which}: {}): {}", binaries.join(", "), labels.join(", ")), None)
        };
        Check { id, status, message, hint }
    }
}

/// Whether the marked block of `text` is the one setup writes today (`None`: no block).
pub fn block_is_current(text: Option<&str>, body: &str) -> Option<bool> {
    let text = text?;
    text.contains(super::mdblock::BEGIN).then(|| super::mdblock::with_block(text, body) == text)
}
