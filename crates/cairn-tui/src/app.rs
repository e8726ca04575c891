//! The state machine of `cairn tui`: keys and answers in, state and requests out. Nothing
//! here touches the terminal or waits for the store, so every transition is a unit test:
//! a key may queue [`Request`]s (each one [`Op`]) and an [`Effect`] for the runtime;
//! answers come back through [`App::on_response`], matched to the view that asked.

use cairn_core::CairnError;
use cairn_core::history::query::{
    MessagePreview, PartRequest, PulledMessage, SearchMessage, Section, SessionListing, TurnPreview,
};
use cairn_core::memory::ListFilter;
use cairn_core::model::Observation;
use cairn_core::ops::{GetResponse, Op, OpKind, OpOutput, RelationStatsRequest, SearchResponse, SyncStatusRequest};
use cairn_core::relations::{RelationRow, VERDICTS};
use cairn_core::text::Scope;
use cairn_core::views::{Stats, Timeline};
use ratatui::layout::Rect;
use ratatui::widgets::ListState;

/// How `cairn tui` was started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Edits allowed (`--write`): they go to the daemon, started if none runs.
    pub write: bool,
    /// Where operations go (`daemon 127.0.0.1:…`, `file`), for the header.
    pub connection: String,
    /// The project of the directory `cairn tui` runs in: what `s` scans for conflicts.
    pub project: Option<String>,
}

/// One operation for a worker, tagged so its answer finds the view that asked.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: u64,
    pub op: Op,
    pub lane: Lane,
}

/// Which worker runs a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Everything quick, in the order sent.
    InOrder,
    /// A search: only the newest waiting one is run.
    NewestOnly,
    /// Seconds of model time (a semantic scan): apart, so browsing never waits behind it.
    Long,
}

/// A worker's answer to [`Request`] `id`.
#[derive(Debug)]
pub struct Response {
    pub id: u64,
    pub result: cairn_core::Result<OpOutput>,
}

/// What only the runtime can do: leave the screen for the user's editor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Edit this memory's content in `$EDITOR`, then [`App::edited`].
    Edit { id: i64, content: String },
}

/// A list with a selection, filled by one request.
#[derive(Debug)]
pub struct ListView<T> {
    pub items: Vec<T>,
    pub state: ListState,
    pub loading: Option<u64>,
    pub error: Option<String>,
}

impl<T> Default for ListView<T> {
    fn default() -> Self {
        ListView { items: Vec::new(), state: ListState::default(), loading: None, error: None }
    }
}

impl<T> ListView<T> {
    fn fill(&mut self, items: Vec<T>) {
        self.items = items;
        self.loading = None;
        self.error = None;
        let selected = self.state.selected().unwrap_or(0).min(self.items.len().saturating_sub(1));
        self.state.select(if self.items.is_empty() { None } else { Some(selected) });
    }

    pub fn selected(&self) -> Option<&T> {
        self.state.selected().and_then(|i| self.items.get(i))
    }

    fn step(&mut self, by: isize) {
        if self.items.is_empty() {
            return;
        }
        let last = self.items.len() - 1;
        let now = self.state.selected().unwrap_or(0);
        let next = now.saturating_add_signed(by).min(last);
        self.state.select(Some(next));
    }

    fn jump(&mut self, end: bool) {
        if !self.items.is_empty() {
            self.state.select(Some(if end { self.items.len() - 1 } else { 0 }));
        }
    }
}

/// Text shown whole, scrolled (a memory, a part); lines are wrapped when drawn.
#[derive(Debug, Default)]
pub struct Scroll {
    pub offset: usize,
    /// Lines the last frame had, to clamp scrolling.
    pub total: usize,
    pub height: usize,
}

impl Scroll {
    fn jump(&mut self, end: bool) {
        self.offset = if end { self.total.saturating_sub(self.height) } else { 0 };
    }

    fn by(&mut self, delta: isize) {
        let max = self.total.saturating_sub(self.height.max(1));
        self.offset = self.offset.saturating_add_signed(delta).min(max);
    }
}

#[derive(Debug, Default)]
pub struct Dashboard {
    pub stats: Option<Stats>,
    pub pending_review: Option<i64>,
    /// What syncs (git, a hub) and how it stands; `None` until answered or when the store
    /// cannot say (an older schema opened read-only).
    pub sync: Option<Box<cairn_core::sync::SyncStatus>>,
    sync_request: u64,
    pub recent: ListView<Observation>,
    pub loading: Vec<u64>,
    pub error: Option<String>,
}

#[derive(Debug, Default)]
pub struct SearchView {
    pub input: String,
    /// Keys go to the input (else to the results).
    pub editing: bool,
    pub project: Option<String>,
    pub kind: Option<String>,
    pub scope: Option<Scope>,
    pub results: ListView<cairn_core::search::AnnotatedHit>,
    pub response: Option<SearchResponse>,
    /// The newest query sent, and the newest whose answer is shown.
    pub sent: u64,
    pub shown: u64,
    /// The text of the results shown.
    pub shown_query: String,
}

#[derive(Debug, Default)]
pub struct Detail {
    pub id: i64,
    pub memory: Option<GetResponse>,
    pub timeline: Option<Timeline>,
    pub relations: Vec<RelationRow>,
    pub scroll: Scroll,
    pub loading: Vec<u64>,
    pub error: Option<String>,
    /// `d` was pressed once: the next `y` deletes.
    pub confirm_delete: bool,
    /// Bumped when the content changes, so the wrapped lines are made again.
    pub version: u64,
    pub wrapped: Option<crate::text::Wrapped>,
}

#[derive(Debug, Default)]
pub struct HistorySearchView {
    pub input: String,
    pub editing: bool,
    pub results: ListView<SearchMessage>,
    pub sent: u64,
}

/// One screen; the app keeps a stack of them (Esc goes back).
#[derive(Debug)]
pub enum View {
    Dashboard(Dashboard),
    Search(SearchView),
    Detail(Box<Detail>),
    Conflicts(ListView<RelationRow>),
    /// Soft-deleted memories, to restore.
    Trash(ListView<Observation>),
    Sessions(ListView<SessionListing>),
    Turns {
        session: String,
        list: ListView<TurnPreview>,
    },
    Messages {
        session: String,
        list: ListView<MessagePreview>,
    },
    Message {
        session: String,
        message: Option<PulledMessage>,
        list: ListView<Section>,
    },
    Part {
        title: String,
        text: String,
        scroll: Scroll,
        loading: Option<u64>,
        request: Option<PartRequest>,
        wrapped: Option<crate::text::Wrapped>,
    },
    HistorySearch(HistorySearchView),
}

impl View {
    pub fn title(&self) -> &'static str {
        match self {
            View::Dashboard(_) => "dashboard",
            View::Search(_) => "search",
            View::Detail(_) => "memory",
            View::Conflicts(_) => "conflicts",
            View::Trash(_) => "trash",
            View::Sessions(_) => "sessions",
            View::Turns { .. } => "turns",
            View::Messages { .. } => "messages",
            View::Message { .. } => "message",
            View::Part { .. } => "part",
            View::HistorySearch(_) => "history search",
        }
    }

    /// Whether keys go to a text field (so `q` types a q).
    fn editing(&self) -> bool {
        match self {
            View::Search(s) => s.editing,
            View::HistorySearch(s) => s.editing,
            _ => false,
        }
    }

    fn in_history(&self) -> bool {
        matches!(
            self,
            View::Sessions(_)
                | View::Turns { .. }
                | View::Messages { .. }
                | View::Message { .. }
                | View::Part { .. }
                | View::HistorySearch(_)
        )
    }
}

/// Verdict keys of the conflicts queue: `1`… in the order of [`VERDICTS`].
pub fn verdict_for_key(c: char) -> Option<&'static str> {
    let index = c.to_digit(10)?.checked_sub(1)? as usize;
    VERDICTS.get(index).copied()
}

/// Parts longer than this are read in pages of it, all of them in turn.
const PART_PAGE: usize = 100_000;
/// A part stops loading past this many bytes: each page is wrapped again with the whole
/// text, so this bounds that work (a viewer, not a dump; `cairn history part` pages on).
const PART_MAX: usize = 2_000_000;

pub struct App {
    pub options: Options,
    pub stack: Vec<View>,
    pub help: bool,
    pub quit: bool,
    /// A line for the user at the bottom: what happened, or why not.
    pub status: String,
    next_id: u64,
    pub outbox: Vec<Request>,
    /// Writes sent, with what to say when each succeeds.
    writes: Vec<(u64, String, OpKind)>,
    pub effect: Option<Effect>,
    /// Where the last frame drew the current list, for mouse clicks.
    pub list_area: Rect,
    /// The conflicts view lists the verdicts given (who gave each) instead of the pairs
    /// waiting for one (`v` switches).
    pub verdicts_shown: bool,
    /// The conflicts scan under way (`s`), one batch at a time.
    pub scan: Option<scan::ScanProgress>,
}

impl App {
    pub fn new(options: Options) -> App {
        let mut app = App {
            options,
            stack: vec![View::Dashboard(Dashboard::default())],
            help: false,
            quit: false,
            status: String::new(),
            next_id: 0,
            outbox: Vec::new(),
            writes: Vec::new(),
            effect: None,
            list_area: Rect::default(),
            verdicts_shown: false,
            scan: None,
        };
        app.load_dashboard();
        app
    }

    pub fn view(&self) -> &View {
        self.stack.last().expect("the dashboard is never popped")
    }

    fn view_mut(&mut self) -> &mut View {
        self.stack.last_mut().expect("the dashboard is never popped")
    }

    /// Queue an operation; its id.
    fn send(&mut self, op: Op) -> u64 {
        self.send_as(op, Lane::InOrder)
    }

    fn send_as(&mut self, op: Op, lane: Lane) -> u64 {
        self.next_id += 1;
        self.outbox.push(Request { id: self.next_id, op, lane });
        self.next_id
    }

    fn load_dashboard(&mut self) {
        let stats = self.send(Op::Stats);
        let recent = self.send(Op::List(ListFilter { limit: 50, ..ListFilter::default() }));
        let pending = self.send(Op::RelationStats(RelationStatsRequest { project: None }));
        let sync = self.send(Op::SyncStatus(SyncStatusRequest { directory: None }));
        if let Some(View::Dashboard(d)) = self.stack.first_mut() {
            d.loading = vec![stats, recent, pending, sync];
            d.sync_request = sync;
            d.recent.loading = Some(recent);
        }
    }

    /// The projects and types known from the dashboard, for the search filters.
    fn stats(&self) -> Option<&Stats> {
        match self.stack.first() {
            Some(View::Dashboard(d)) => d.stats.as_ref(),
            _ => None,
        }
    }

    fn push(&mut self, view: View) {
        self.stack.push(view);
    }

    fn back(&mut self) {
        if self.stack.len() > 1 {
            self.stack.pop();
        }
    }

    fn refuse_read_only(&mut self) -> bool {
        if self.options.write {
            return false;
        }
        self.status = "read-only: start `cairn tui --write` to edit, delete, pin or judge".into();
        true
    }
}

mod answers;
mod keys;
mod open;
mod scan;
mod search;

#[derive(Debug, Clone, Copy)]
enum Filter {
    Project,
    Kind,
    Scope,
}

/// The choice after `current` in `choices`, then none (every value) again.
fn next_choice(choices: &[String], current: Option<&str>) -> Option<String> {
    match current.and_then(|c| choices.iter().position(|x| x == c)) {
        None => choices.first().cloned(),
        Some(i) => choices.get(i + 1).cloned(),
    }
}

/// Longest query typed into the search field (the store refuses longer ones anyway).
const MAX_QUERY: usize = 500;

pub fn error_line(e: &CairnError) -> String {
    let hint = e.hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default();
    crate::text::one_line(&format!("error[{}]: {}{hint}", e.code.as_str(), e.message), 400)
}
