//! The state machine of `cairn tui`: keys and answers in, state and requests out. Nothing
//! here touches the terminal or waits for the store, so every transition is a unit test:
//! a key may queue [`Request`]s (each one [`Op`]) and an [`Effect`] for the runtime;
//! answers come back through [`App::on_response`], matched to the view that asked.

use cairn_core::CairnError;
use cairn_core::history::query::{
    MessagePreview, MessageRequest, MessagesRequest, PartRequest, PulledMessage, SearchMessage,
    SearchRequest as HistorySearchRequest, Section, SessionListing, SessionsRequest, TurnPreview, TurnsRequest,
};
use cairn_core::memory::{ListFilter, ObservationPatch};
use cairn_core::model::Observation;
use cairn_core::ops::{GetResponse, Op, OpKind, OpOutput, SearchResponse};
use cairn_core::relations::{Judgment, RelationFilter, RelationRow, VERDICTS};
use cairn_core::search::SearchQuery;
use cairn_core::text::Scope;
use cairn_core::views::{Stats, Timeline};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;
use ratatui::widgets::ListState;

/// How `cairn tui` was started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Edits allowed (`--write`): they go to the daemon, started if none runs.
    pub write: bool,
    /// Where operations go (`daemon 127.0.0.1:…`, `file`), for the header.
    pub connection: String,
}

/// One operation for a worker, tagged so its answer finds the view that asked.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: u64,
    pub op: Op,
    /// A search: only the newest waiting one is run.
    pub latest_only: bool,
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
    pub sync: Option<Box<cairn_core::sync::git::SyncStatus>>,
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
    pub results: ListView<cairn_core::search::SearchHit>,
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
        self.send_as(op, false)
    }

    fn send_as(&mut self, op: Op, latest_only: bool) -> u64 {
        self.next_id += 1;
        self.outbox.push(Request { id: self.next_id, op, latest_only });
        self.next_id
    }

    fn load_dashboard(&mut self) {
        let stats = self.send(Op::Stats);
        let recent = self.send(Op::List(ListFilter { limit: 50, ..ListFilter::default() }));
        let pending = self.send(Op::RelationStats { project: None });
        let sync = self.send(Op::SyncStatus { directory: None });
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

    // ----- keys -----------------------------------------------------------------------

    pub fn on_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.help {
            self.help = false;
            return;
        }
        if self.view().editing() {
            self.edit_key(key);
            return;
        }
        // A delete waits for `y` as the very next key; anything else keeps the memory.
        if let View::Detail(d) = self.view_mut()
            && d.confirm_delete
            && key.code != KeyCode::Char('y')
        {
            d.confirm_delete = false;
            self.status = "kept".into();
        }
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Esc | KeyCode::Backspace | KeyCode::Left => self.back(),
            KeyCode::Char('/') => self.start_search(),
            KeyCode::Char('c') if !matches!(self.view(), View::Conflicts(_)) => self.open_conflicts(),
            KeyCode::Char('h') if !self.view().in_history() => self.open_sessions(),
            KeyCode::Char('t') if !matches!(self.view(), View::Trash(_)) => self.open_trash(),
            KeyCode::Char('g') => {
                self.stack.truncate(1);
                self.load_dashboard();
            }
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::PageUp => self.step(-10),
            KeyCode::PageDown | KeyCode::Char(' ') => self.step(10),
            KeyCode::Home => self.jump(false),
            KeyCode::End => self.jump(true),
            KeyCode::Enter | KeyCode::Right => self.open_selected(),
            KeyCode::Tab if matches!(self.view(), View::Search(_)) => self.set_editing(true),
            KeyCode::Char(c) => self.view_key(c, ctrl),
            _ => {}
        }
    }

    /// A key while typing into the search field.
    fn edit_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => {
                let empty = match self.view() {
                    View::Search(s) => s.input.is_empty() && s.results.items.is_empty(),
                    View::HistorySearch(s) => s.input.is_empty() && s.results.items.is_empty(),
                    _ => false,
                };
                if empty { self.back() } else { self.set_editing(false) }
            }
            KeyCode::Enter => self.run_search(true),
            KeyCode::Down | KeyCode::Tab => self.set_editing(false),
            KeyCode::Backspace => {
                if let Some(input) = self.input_mut() {
                    input.pop();
                }
                self.run_search(false);
            }
            KeyCode::Char('u') if ctrl => {
                if let Some(input) = self.input_mut() {
                    input.clear();
                }
                self.run_search(false);
            }
            KeyCode::Char('p') if ctrl => self.cycle_filter(Filter::Project),
            KeyCode::Char('t') if ctrl => self.cycle_filter(Filter::Kind),
            KeyCode::Char('o') if ctrl => self.cycle_filter(Filter::Scope),
            KeyCode::Char(c) if !ctrl => {
                if let Some(input) = self.input_mut()
                    && input.chars().count() < MAX_QUERY
                {
                    input.push(c);
                }
                self.run_search(false);
            }
            _ => {}
        }
    }

    fn input_mut(&mut self) -> Option<&mut String> {
        match self.view_mut() {
            View::Search(s) => Some(&mut s.input),
            View::HistorySearch(s) => Some(&mut s.input),
            _ => None,
        }
    }

    fn set_editing(&mut self, editing: bool) {
        match self.view_mut() {
            View::Search(s) => s.editing = editing,
            View::HistorySearch(s) => s.editing = editing,
            _ => {}
        }
    }

    /// A letter meaning something on this view only.
    fn view_key(&mut self, c: char, ctrl: bool) {
        match self.view() {
            View::Search(_) if ctrl => match c {
                'p' => self.cycle_filter(Filter::Project),
                't' => self.cycle_filter(Filter::Kind),
                'o' => self.cycle_filter(Filter::Scope),
                _ => {}
            },
            View::Detail(_) => self.detail_key(c),
            View::Conflicts(_) => self.conflict_key(c),
            View::Trash(list) if c == 'u' => {
                let Some(id) = list.selected().map(|m| m.id) else { return };
                self.write(Op::Restore { id }, format!("#{id} restored"));
            }
            View::Dashboard(_) | View::Sessions(_) if c == 'r' => self.reload(),
            _ => {}
        }
    }

    fn reload(&mut self) {
        match self.view() {
            View::Dashboard(_) => self.load_dashboard(),
            View::Sessions(_) => {
                self.back();
                self.open_sessions();
            }
            _ => {}
        }
    }

    fn step(&mut self, by: isize) {
        match self.view_mut() {
            View::Dashboard(d) => d.recent.step(by),
            View::Search(s) => s.results.step(by),
            View::Detail(d) => d.scroll.by(by),
            View::Conflicts(l) => l.step(by),
            View::Trash(l) => l.step(by),
            View::Sessions(l) => l.step(by),
            View::Turns { list, .. } => list.step(by),
            View::Messages { list, .. } => list.step(by),
            View::Message { list, .. } => list.step(by),
            View::Part { scroll, .. } => scroll.by(by),
            View::HistorySearch(s) => s.results.step(by),
        }
    }

    fn jump(&mut self, end: bool) {
        match self.view_mut() {
            View::Detail(d) => d.scroll.jump(end),
            View::Part { scroll, .. } => scroll.jump(end),
            View::Dashboard(d) => d.recent.jump(end),
            View::Search(s) => s.results.jump(end),
            View::Conflicts(l) => l.jump(end),
            View::Trash(l) => l.jump(end),
            View::Sessions(l) => l.jump(end),
            View::Turns { list, .. } => list.jump(end),
            View::Messages { list, .. } => list.jump(end),
            View::Message { list, .. } => list.jump(end),
            View::HistorySearch(s) => s.results.jump(end),
        }
    }

    // ----- mouse ----------------------------------------------------------------------

    pub fn on_mouse(&mut self, mouse: MouseEvent) {
        if self.help {
            return;
        }
        match mouse.kind {
            MouseEventKind::ScrollDown => self.step(3),
            MouseEventKind::ScrollUp => self.step(-3),
            MouseEventKind::Down(ratatui::crossterm::event::MouseButton::Left) => self.click(mouse.column, mouse.row),
            _ => {}
        }
    }

    /// A click on a list row selects it; a click on the selected row opens it.
    fn click(&mut self, column: u16, row: u16) {
        let area = self.list_area;
        let inside = column >= area.x && column < area.right() && row > area.y && row + 1 < area.bottom();
        if !inside {
            return;
        }
        let row = usize::from(row - area.y - 1);
        let open = match self.view_mut() {
            View::Dashboard(d) => click_row(&mut d.recent, row),
            View::Search(s) => {
                s.editing = false;
                click_row(&mut s.results, row)
            }
            View::Conflicts(l) => click_row(l, row),
            View::Trash(l) => click_row(l, row),
            View::Sessions(l) => click_row(l, row),
            View::Turns { list, .. } => click_row(list, row),
            View::Messages { list, .. } => click_row(list, row),
            View::Message { list, .. } => click_row(list, row),
            View::HistorySearch(s) => click_row(&mut s.results, row),
            View::Detail(_) | View::Part { .. } => false,
        };
        if open {
            self.open_selected();
        }
    }

    // ----- search ---------------------------------------------------------------------

    /// `/`: the history's search on a history screen, else the memories'.
    fn start_search(&mut self) {
        if self.view().in_history() {
            if let View::HistorySearch(s) = self.view_mut() {
                s.editing = true;
                return;
            }
            self.push(View::HistorySearch(HistorySearchView { editing: true, ..HistorySearchView::default() }));
            return;
        }
        if let View::Search(s) = self.view_mut() {
            s.editing = true;
            return;
        }
        self.push(View::Search(SearchView { editing: true, ..SearchView::default() }));
    }

    /// Send the query as it stands (as you type), or `submit` it: run it even when unchanged,
    /// and move to the results.
    fn run_search(&mut self, submit: bool) {
        let op = match self.view() {
            View::Search(s) => {
                if s.input.trim().is_empty() {
                    None
                } else {
                    Some(Op::Search(SearchQuery {
                        text: s.input.clone(),
                        project: s.project.clone(),
                        all_projects: s.project.is_none(),
                        kind: s.kind.clone(),
                        scope: s.scope,
                        limit: 50,
                        ..SearchQuery::default()
                    }))
                }
            }
            View::HistorySearch(s) => (submit && !s.input.trim().is_empty()).then(|| {
                Op::HistorySearch(HistorySearchRequest {
                    query: s.input.clone(),
                    session_id: None,
                    project: None,
                    literal: false,
                    kinds: None,
                    caller_session_id: None,
                })
            }),
            _ => None,
        };
        let id = op.map(|op| self.send_as(op, true));
        match self.view_mut() {
            View::Search(s) => {
                match id {
                    Some(id) => s.sent = id,
                    None if s.input.trim().is_empty() => {
                        s.results.fill(Vec::new());
                        s.response = None;
                        s.shown_query.clear();
                    }
                    None => {}
                }
                if submit {
                    s.editing = false;
                }
            }
            View::HistorySearch(s) => {
                if let Some(id) = id {
                    s.sent = id;
                    s.results.loading = Some(id);
                }
                if submit {
                    s.editing = false;
                }
            }
            _ => {}
        }
    }

    fn cycle_filter(&mut self, filter: Filter) {
        let choices: Vec<String> = match (filter, self.stats()) {
            (Filter::Project, Some(stats)) => stats.projects.clone(),
            (Filter::Kind, Some(stats)) => stats.by_type.keys().cloned().collect(),
            (Filter::Scope, _) => vec!["project".into(), "personal".into()],
            _ => Vec::new(),
        };
        let View::Search(s) = self.view_mut() else { return };
        let current = match filter {
            Filter::Project => s.project.clone(),
            Filter::Kind => s.kind.clone(),
            Filter::Scope => s.scope.map(|sc| if sc == Scope::Personal { "personal" } else { "project" }.to_owned()),
        };
        let next = next_choice(&choices, current.as_deref());
        match filter {
            Filter::Project => s.project = next,
            Filter::Kind => s.kind = next,
            Filter::Scope => s.scope = next.map(|v| Scope::parse(&v)),
        }
        self.run_search(false);
    }

    // ----- opening things -------------------------------------------------------------

    fn open_selected(&mut self) {
        enum Next {
            Memory(i64),
            /// A conflict names its memories by sync id: find the first by its title.
            Relation(String),
            Session(String),
            Turn(String, String),
            Message(String, String),
            Part(String, PartRequest),
            Nothing,
        }
        let next = match self.view() {
            View::Dashboard(d) => d.recent.selected().map_or(Next::Nothing, |m| Next::Memory(m.id)),
            View::Search(s) => s.results.selected().map_or(Next::Nothing, |h| Next::Memory(h.observation.id)),
            View::Conflicts(l) => {
                l.selected().and_then(|r| r.source_title.clone()).map_or(Next::Nothing, Next::Relation)
            }
            View::Sessions(l) => l.selected().map_or(Next::Nothing, |s| Next::Session(s.session_id.clone())),
            View::Turns { session, list } => {
                list.selected().map_or(Next::Nothing, |t| Next::Turn(session.clone(), t.user.message_id.clone()))
            }
            View::Messages { session, list } => {
                list.selected().map_or(Next::Nothing, |m| Next::Message(session.clone(), m.message_id.clone()))
            }
            View::Message { session, message: Some(message), list } => {
                match list.selected().and_then(section_part_id) {
                    Some(part_id) => Next::Part(
                        format!("{} · turn {}", message.role, message.turn_number),
                        PartRequest {
                            session_id: session.clone(),
                            message_id: message.message_id.clone(),
                            part_id,
                            offset: 0,
                            max_chars: PART_PAGE,
                            caller_session_id: None,
                        },
                    ),
                    None => Next::Nothing,
                }
            }
            View::HistorySearch(s) => s
                .results
                .selected()
                .map_or(Next::Nothing, |m| Next::Message(m.session_id.clone(), m.message_id.clone())),
            View::Detail(_) | View::Trash(_) | View::Message { .. } | View::Part { .. } => Next::Nothing,
        };
        match next {
            Next::Memory(id) => self.open_memory(id),
            Next::Relation(title) => {
                self.push(View::Search(SearchView { input: title, ..SearchView::default() }));
                self.run_search(true);
            }
            Next::Session(id) => self.open_turns(id),
            Next::Turn(session, message) => self.open_messages(session, message),
            Next::Message(session, message) => self.open_message(session, message),
            Next::Part(title, request) => self.open_part(title, request),
            Next::Nothing => {}
        }
    }

    pub fn open_memory(&mut self, id: i64) {
        let mut detail = Detail { id, ..Detail::default() };
        detail.loading.push(self.send(Op::Get { id, revisions: true }));
        detail.loading.push(self.send(Op::Timeline { id, before: 3, after: 3 }));
        self.push(View::Detail(Box::new(detail)));
    }

    fn open_conflicts(&mut self) {
        let id = self.send(Op::Relations(RelationFilter {
            status: Some("pending".into()),
            limit: Some(200),
            ..RelationFilter::default()
        }));
        self.push(View::Conflicts(ListView { loading: Some(id), ..ListView::default() }));
    }

    fn open_trash(&mut self) {
        let id = self.send(Op::List(ListFilter { limit: 200, deleted: true, ..ListFilter::default() }));
        self.push(View::Trash(ListView { loading: Some(id), ..ListView::default() }));
    }

    fn open_sessions(&mut self) {
        let id = self.send(Op::HistorySessions(SessionsRequest {
            project: None,
            query: None,
            host: None,
            limit: 200,
            include_children: false,
        }));
        self.push(View::Sessions(ListView { loading: Some(id), ..ListView::default() }));
    }

    fn open_turns(&mut self, session: String) {
        let id = self.send(Op::HistoryBrowseTurns(TurnsRequest {
            session_id: session.clone(),
            turn_number: None,
            num_before: 50,
            num_after: 0,
            caller_session_id: None,
        }));
        self.push(View::Turns { session, list: ListView { loading: Some(id), ..ListView::default() } });
    }

    fn open_messages(&mut self, session: String, message_id: String) {
        let id = self.send(Op::HistoryBrowseMessages(MessagesRequest {
            session_id: session.clone(),
            message_id: Some(message_id),
            num_before: 0,
            num_after: 50,
            caller_session_id: None,
        }));
        self.push(View::Messages { session, list: ListView { loading: Some(id), ..ListView::default() } });
    }

    fn open_message(&mut self, session: String, message_id: String) {
        let id = self.send(Op::HistoryPullMessage(MessageRequest {
            session_id: session.clone(),
            message_id,
            caller_session_id: None,
        }));
        self.push(View::Message {
            session,
            message: None,
            list: ListView { loading: Some(id), ..ListView::default() },
        });
    }

    fn open_part(&mut self, title: String, request: PartRequest) {
        let id = self.send(Op::HistoryPullPart(request.clone()));
        self.push(View::Part {
            title,
            text: String::new(),
            scroll: Scroll::default(),
            loading: Some(id),
            request: Some(request),
            wrapped: None,
        });
    }

    // ----- a memory's actions ---------------------------------------------------------

    fn detail_key(&mut self, c: char) {
        let View::Detail(detail) = self.view_mut() else { return };
        let confirming = std::mem::take(&mut detail.confirm_delete);
        let id = detail.id;
        let memory = detail.memory.as_ref().map(|m| m.observation.clone());
        match c {
            'r' => self.reload_detail(),
            'y' if confirming => {
                let op = Op::Delete { id, hard: false };
                self.write(op, format!("#{id} deleted (u restores it)"));
            }
            'd' if !self.refuse_read_only() => {
                if let View::Detail(d) = self.view_mut() {
                    d.confirm_delete = true;
                }
                self.status = format!("delete #{id}? y to confirm, any other key to keep it");
            }
            'u' if !self.refuse_read_only() => self.write(Op::Restore { id }, format!("#{id} restored")),
            'p' if !self.refuse_read_only() => {
                let pinned = !memory.as_ref().is_some_and(|m| m.pinned);
                let what = if pinned { "pinned" } else { "unpinned" };
                self.write(Op::Pin { id, pinned }, format!("#{id} {what}"));
            }
            'e' if !self.refuse_read_only() => match memory {
                Some(m) => self.effect = Some(Effect::Edit { id, content: m.content }),
                None => self.status = "the memory is not loaded yet".into(),
            },
            _ => {}
        }
    }

    /// The editor returned: save the content when it changed.
    pub fn edited(&mut self, id: i64, before: &str, after: Result<String, String>) {
        match after {
            Err(e) => self.status = format!("edit cancelled: {}", crate::text::one_line(&e, 200)),
            Ok(after) if after == before => self.status = "unchanged".into(),
            Ok(after) => {
                let patch = ObservationPatch { content: Some(after), ..ObservationPatch::default() };
                self.write(Op::Update { id, patch }, format!("#{id} saved"));
            }
        }
    }

    /// Send a write; on success `done` is shown and the view reloaded.
    fn write(&mut self, op: Op, done: String) {
        if self.refuse_read_only() {
            return;
        }
        let kind = op.kind();
        let id = self.send(op);
        self.writes.push((id, done, kind));
        self.status = "saving…".into();
    }

    fn reload_detail(&mut self) {
        let id = match self.view() {
            View::Detail(d) => d.id,
            _ => return,
        };
        let get = self.send(Op::Get { id, revisions: true });
        let timeline = self.send(Op::Timeline { id, before: 3, after: 3 });
        if let View::Detail(d) = self.view_mut() {
            d.loading = vec![get, timeline];
        }
    }

    fn conflict_key(&mut self, c: char) {
        let Some(verdict) = verdict_for_key(c) else { return };
        if self.refuse_read_only() {
            return;
        }
        let View::Conflicts(list) = self.view() else { return };
        let Some(row) = list.selected() else { return };
        let judgment = Judgment {
            judgment_id: row.sync_id.clone(),
            relation: verdict.to_owned(),
            reason: Some("judged in cairn tui".into()),
            evidence: None,
            confidence: None,
            session_id: None,
        };
        self.write(Op::Judge(judgment), format!("judged: {verdict}"));
    }

    // ----- answers --------------------------------------------------------------------

    pub fn on_response(&mut self, response: Response) {
        let Response { id, result } = response;
        if let Some(at) = self.writes.iter().position(|(w, _, _)| *w == id) {
            let (_, done, kind) = self.writes.remove(at);
            match result {
                Ok(_) => {
                    self.status = done;
                    self.after_write(kind);
                }
                Err(e) => self.status = error_line(&e),
            }
            return;
        }
        let mut follow_up = None;
        for view in &mut self.stack {
            if let Some(next) = answer(view, id, &result) {
                follow_up = next;
                break;
            }
        }
        match follow_up {
            Some(FollowUp::Relations { project }) => {
                let id = self.send(Op::Relations(RelationFilter {
                    project: Some(project),
                    limit: Some(500),
                    ..RelationFilter::default()
                }));
                if let Some(View::Detail(d)) = self.stack.iter_mut().rev().find(|v| matches!(v, View::Detail(_))) {
                    d.loading.push(id);
                }
            }
            Some(FollowUp::NextPage(request)) => {
                let id = self.send(Op::HistoryPullPart(request.clone()));
                if let Some(View::Part { loading, request: slot, .. }) = self.stack.last_mut() {
                    *loading = Some(id);
                    *slot = Some(request);
                }
            }
            None => {}
        }
    }

    /// After a write: reload what shows it. A deleted memory cannot be read back (`get`
    /// answers live ones), so it stays on screen marked deleted, ready for `u`.
    fn after_write(&mut self, kind: OpKind) {
        match self.view_mut() {
            View::Detail(d) if kind == OpKind::Delete => {
                if let Some(got) = d.memory.as_mut() {
                    got.observation.deleted_at = Some("now".into());
                }
                d.version += 1;
            }
            View::Detail(d) => {
                d.error = None;
                self.reload_detail();
            }
            View::Conflicts(_) => {
                self.back();
                self.open_conflicts();
            }
            View::Trash(_) => {
                self.back();
                self.open_trash();
            }
            _ => {}
        }
    }
}

/// What an answer asks for next.
enum FollowUp {
    /// The memory is loaded: its project's relations.
    Relations { project: String },
    /// A part's next page.
    NextPage(PartRequest),
}

/// Give `result` to `view` when it asked for `id`: `Some` when it did.
fn answer(view: &mut View, id: u64, result: &cairn_core::Result<OpOutput>) -> Option<Option<FollowUp>> {
    let error = result.as_ref().err().map(error_line);
    match (view, result.as_ref().ok()) {
        (View::Dashboard(d), output) if d.loading.contains(&id) => {
            d.loading.retain(|l| *l != id);
            match output {
                Some(OpOutput::Stats(stats)) => d.stats = Some(stats.clone()),
                Some(OpOutput::List(items)) => d.recent.fill(items.clone()),
                Some(OpOutput::RelationStats(stats)) => {
                    d.pending_review = Some(stats.by_judgment_status.get("pending").copied().unwrap_or(0));
                }
                Some(OpOutput::SyncStatus(status)) => d.sync = Some(Box::new(status.clone())),
                // The sync line is a detail: its failure does not hide the dashboard.
                None if id == d.sync_request => d.sync = None,
                _ => d.error = error,
            }
            Some(None)
        }
        (View::Search(s), output) if id == s.sent || (id > s.shown && id < s.sent) => {
            if id < s.shown {
                return Some(None);
            }
            match output {
                Some(OpOutput::Search(found)) => {
                    s.shown = id;
                    s.results.fill(found.hits.clone());
                    s.response = Some(found.clone());
                    s.shown_query.clone_from(&s.input);
                }
                _ => s.results.error = error,
            }
            Some(None)
        }
        (View::Detail(d), output) if d.loading.contains(&id) => {
            d.loading.retain(|l| *l != id);
            d.version += 1;
            match output {
                Some(OpOutput::Get(got)) => {
                    let project = got.observation.project.clone();
                    let sync_id = got.observation.sync_id.clone();
                    d.memory = Some(got.clone());
                    d.relations.retain(|r| r.source_id == sync_id || r.target_id == sync_id);
                    return Some(Some(FollowUp::Relations { project }));
                }
                Some(OpOutput::Timeline(timeline)) => d.timeline = Some(timeline.clone()),
                Some(OpOutput::Relations(page)) => {
                    let sync_id = d.memory.as_ref().map(|m| m.observation.sync_id.as_str()).unwrap_or_default();
                    d.relations = page
                        .relations
                        .iter()
                        .filter(|r| r.source_id == sync_id || r.target_id == sync_id)
                        .cloned()
                        .collect();
                }
                _ => d.error = error,
            }
            Some(None)
        }
        (View::Conflicts(list), output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::Relations(page)) => list.fill(page.relations.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Trash(list), output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::List(items)) => list.fill(items.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Sessions(list), output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistorySessions(sessions)) => list.fill(sessions.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Turns { list, .. }, output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistoryBrowseTurns(page)) => {
                    list.fill(page.turns.clone());
                    list.jump(true);
                }
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Messages { list, .. }, output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistoryBrowseMessages(page)) => list.fill(page.messages.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Message { message, list, .. }, output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistoryPullMessage(pulled)) => {
                    list.fill(pulled.sections.clone());
                    *message = Some(pulled.clone());
                }
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Part { text, loading, request, .. }, output) if *loading == Some(id) => {
            *loading = None;
            match output {
                Some(OpOutput::HistoryPullPart(page)) => {
                    text.push_str(&page.content);
                    match (page.next_offset, request.as_ref()) {
                        (Some(offset), _) if text.len() >= PART_MAX => text.push_str(&format!(
                            "\n[cut at {PART_MAX} bytes of {} characters: `cairn history part` from offset {offset}]",
                            page.total_chars
                        )),
                        (Some(offset), Some(request)) => {
                            let next = PartRequest { offset: offset as usize, ..request.clone() };
                            return Some(Some(FollowUp::NextPage(next)));
                        }
                        _ => {}
                    }
                }
                _ => text.push_str(&format!("\n[{}]", error.unwrap_or_default())),
            }
            Some(None)
        }
        (View::HistorySearch(s), output) if s.results.loading == Some(id) => {
            match output {
                Some(OpOutput::HistorySearch(found)) => s.results.fill(found.messages.clone()),
                _ => s.results.error = error,
            }
            s.results.loading = None;
            Some(None)
        }
        _ => None,
    }
}

fn section_part_id(section: &Section) -> Option<String> {
    match section {
        Section::Text { part_id, .. } | Section::Reasoning { part_id, .. } | Section::Tool { part_id, .. } => {
            part_id.clone()
        }
        Section::Image { .. } | Section::File { .. } => None,
    }
}

/// Select row `row` of `list`; `true` when it was already selected (a second click opens).
fn click_row<T>(list: &mut ListView<T>, row: usize) -> bool {
    let index = list.state.offset() + row;
    if index >= list.items.len() {
        return false;
    }
    let again = list.state.selected() == Some(index);
    list.state.select(Some(index));
    again
}

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
