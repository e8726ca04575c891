//! Drawing the app: one function per view, over a header and a footer. Everything from the
//! store goes through [`crate::text`] first, and [`draw`] checks the finished frame once more
//! so no control character reaches the terminal.

use cairn_core::history::query::Section;
use cairn_core::relations::VERDICTS;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, Paragraph, Wrap};

use crate::app::{App, Dashboard, Detail, HistorySearchView, ListView, Scroll, SearchView, View};
use crate::text::{Wrapped, clean, highlighted, is_unsafe_symbol, one_line, short_time};

/// Below this the app shows how big the terminal must be instead of a broken layout.
pub const MIN_WIDTH: u16 = 50;
pub const MIN_HEIGHT: u16 = 12;

const SELECTED: Style = Style::new().bg(Color::Blue).fg(Color::White).add_modifier(Modifier::BOLD);
const DIM: Style = Style::new().fg(Color::DarkGray);
const HEADING: Style = Style::new().add_modifier(Modifier::BOLD).fg(Color::Cyan);

pub fn draw(frame: &mut Frame, app: &mut App) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(frame, area);
    } else {
        let [header, body, footer] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)]).areas(area);
        draw_header(frame, app, header);
        app.list_area = Rect::default();
        draw_view(frame, app, body);
        draw_footer(frame, app, footer);
        if app.help {
            draw_help(frame, area);
        }
    }
    neutralise(frame);
}

/// The last guard: a cell whose symbol holds a control character is replaced.
fn neutralise(frame: &mut Frame) {
    for cell in &mut frame.buffer_mut().content {
        if is_unsafe_symbol(cell.symbol()) {
            cell.set_symbol("�");
        }
    }
}

fn too_small(frame: &mut Frame, area: Rect) {
    let text = format!(
        "Terminal too small: {}×{}.\ncairn tui needs at least {MIN_WIDTH}×{MIN_HEIGHT}.\nEnlarge it, or press q to quit.",
        area.width, area.height
    );
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let mode = if app.options.write { "write" } else { "read-only" };
    let crumbs: Vec<&str> = app.stack.iter().map(View::title).collect();
    let text = format!(" cairn · {} · {} · {mode}", crumbs.join(" › "), clean(&app.options.connection, false));
    let style = Style::new().bg(Color::DarkGray).fg(Color::White);
    frame.render_widget(Paragraph::new(one_line(&text, usize::from(area.width))).style(style), area);
}

fn draw_footer(frame: &mut Frame, app: &App, area: Rect) {
    let line = if app.status.is_empty() {
        Line::styled(hints(app.view()), DIM)
    } else {
        Line::from(one_line(&app.status, usize::from(area.width)))
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The keys of a view, for the footer (all of them on `?`).
fn hints(view: &View) -> String {
    match view {
        View::Dashboard(_) => "/ search · c conflicts · h history · t trash · Enter open · ? help · q quit".into(),
        View::Trash(_) => "↑↓ move · u restore (--write) · Esc back · q quit".into(),
        View::Search(s) if s.editing => {
            "type to search · Enter results · ^P project ^T type ^O scope · Esc stop".into()
        }
        View::Search(_) => "↑↓ move · Enter open · / edit query · ^P ^T ^O filters · Esc back · q quit".into(),
        View::Detail(_) => "↑↓ scroll · e edit · d delete · u restore · p pin · r reload · Esc back".into(),
        View::Conflicts(_) => {
            let keys: Vec<String> = VERDICTS.iter().enumerate().map(|(i, v)| format!("{} {v}", i + 1)).collect();
            // The scan and the switch first: the verdict names are cut on a narrow terminal.
            format!("s scan · v pending/judged · {} · Esc back", keys.join(" "))
        }
        View::HistorySearch(s) if s.editing => "type a query · Enter search · Esc stop".into(),
        View::Sessions(_) | View::Turns { .. } | View::Messages { .. } | View::Message { .. } => {
            "↑↓ move · Enter open · / search history · Esc back · q quit".into()
        }
        View::Part { .. } | View::HistorySearch(_) => "↑↓ PgUp PgDn scroll · / search history · Esc back".into(),
    }
}

fn draw_view(frame: &mut Frame, app: &mut App, area: Rect) {
    let mut list_area = Rect::default();
    match app.stack.last_mut().expect("the dashboard is never popped") {
        View::Dashboard(d) => list_area = dashboard(frame, d, area),
        View::Search(s) => list_area = search(frame, s, area),
        View::Detail(d) => detail(frame, d, area),
        View::Conflicts(list) => {
            list_area = area;
            conflicts(frame, list, area, app.verdicts_shown);
        }
        View::Trash(list) => {
            list_area = area;
            let items = list.items.iter().map(|m| {
                let deleted = m.deleted_at.as_deref().map(short_time).unwrap_or_default();
                ListItem::new(format!("{deleted}  #{:<5} {}", m.id, clean(&m.title, false)))
            });
            let items: Vec<ListItem> = items.collect();
            simple_list(frame, "Trash (deleted memories)", items, list, area);
        }
        View::Sessions(list) => {
            list_area = area;
            let items = list.items.iter().map(|s| {
                let title = s.title.as_deref().or(s.directory.as_deref()).unwrap_or(&s.session_id);
                format!(
                    "{}  {:<11} {:>5} msgs  {}",
                    short_time(&s.updated),
                    clean(&s.host, false),
                    s.messages,
                    clean(title, false)
                )
            });
            let items: Vec<ListItem> = items.map(ListItem::new).collect();
            simple_list(frame, "History sessions", items, list, area);
        }
        View::Turns { list, .. } => {
            list_area = area;
            let items = list.items.iter().map(|t| {
                let user = t.user.preview.as_deref().unwrap_or("…");
                let assistant = t.assistant.preview.as_deref().unwrap_or("…");
                ListItem::new(vec![
                    Line::from(format!("#{:<4} {}", t.turn_number, clean(user, false))),
                    Line::styled(format!("      → {}", clean(assistant, false)), DIM),
                ])
            });
            let items: Vec<ListItem> = items.collect();
            simple_list(frame, "Turns", items, list, area);
        }
        View::Messages { list, .. } => {
            list_area = area;
            let items = list.items.iter().map(|m| {
                ListItem::new(format!(
                    "{:<9} turn {:<4} {}",
                    clean(&m.role, false),
                    m.turn_number,
                    clean(&m.preview, false)
                ))
            });
            let items: Vec<ListItem> = items.collect();
            simple_list(frame, "Messages", items, list, area);
        }
        View::Message { message, list, .. } => {
            list_area = area;
            let title = message.as_ref().map_or_else(
                || "Message".to_owned(),
                |m| format!("{} · turn {} · {}", clean(&m.role, false), m.turn_number, short_time(&m.time)),
            );
            let items: Vec<ListItem> = list.items.iter().map(|s| ListItem::new(section_line(s))).collect();
            simple_list(frame, &title, items, list, area);
        }
        View::Part { title, text, scroll, loading, wrapped, .. } => {
            let title = if loading.is_some() { format!("{title} (loading…)") } else { title.clone() };
            let version = text.len() as u64;
            scrolled(
                frame,
                &title,
                area,
                scroll,
                Wrapped::get(wrapped, inner_width(area), version, || vec![(clean(text, true), Style::default())]),
            );
        }
        View::HistorySearch(s) => list_area = history_search(frame, s, area),
    }
    app.list_area = list_area;
}

fn inner_width(area: Rect) -> usize {
    usize::from(area.width.saturating_sub(2)).max(1)
}

fn block(title: &str) -> Block<'static> {
    Block::default().borders(Borders::ALL).title(Span::styled(format!(" {} ", one_line(title, 60)), HEADING))
}

fn simple_list<T>(frame: &mut Frame, title: &str, items: Vec<ListItem>, list: &mut ListView<T>, area: Rect) {
    let title = list_title(title, list);
    let widget = List::new(items).block(block(&title)).highlight_style(SELECTED);
    frame.render_stateful_widget(widget, area, &mut list.state);
    empty_note(frame, list, area);
}

fn list_title<T>(title: &str, list: &ListView<T>) -> String {
    if list.loading.is_some() { format!("{title} (loading…)") } else { format!("{title} ({})", list.items.len()) }
}

/// "nothing here" or the error, inside an empty list's frame.
fn empty_note<T>(frame: &mut Frame, list: &ListView<T>, area: Rect) {
    let note = match (&list.error, list.items.is_empty(), list.loading) {
        (Some(e), _, _) => e.clone(),
        (None, true, None) => "nothing here".into(),
        _ => return,
    };
    let inner = area.inner(ratatui::layout::Margin { horizontal: 1, vertical: 1 });
    frame.render_widget(Paragraph::new(clean(&note, false)).style(DIM).wrap(Wrap { trim: true }), inner);
}

// ----- dashboard ----------------------------------------------------------------------

/// The dashboard's sync lines: the hub and its phase, or the projects git syncs, or `off`.
fn sync_lines(sync: Option<&cairn_core::sync::SyncStatus>) -> Vec<String> {
    let Some(sync) = sync else { return vec!["sync: off".into()] };
    match &sync.remote {
        Some(remote) => {
            let mut lines =
                vec![format!("sync: {} · {} pending", remote.phase, remote.pending), format!("  hub {}", remote.url)];
            if let Some(error) = remote.last_error.as_ref().or(remote.last_pull_error.as_ref()) {
                lines.push(format!("  last error: {error}"));
            }
            lines
        }
        None if sync.enabled => vec![format!("sync: git ({})", sync.projects.join(", "))],
        None => vec!["sync: off".into()],
    }
}

fn dashboard(frame: &mut Frame, d: &mut Dashboard, area: Rect) -> Rect {
    let top_height = 9.min(area.height / 2).max(4);
    let [top, recent] = Layout::vertical([Constraint::Length(top_height), Constraint::Min(3)]).areas(area);
    let [projects, status] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(top);

    let mut project_lines = Vec::new();
    if let Some(stats) = &d.stats {
        project_lines.push(Line::styled(format!("{:<16} {:>5} {:>5}  last", "project", "mem", "sess"), DIM));
        for p in &stats.by_project {
            let name = if p.project.is_empty() { "(none)" } else { p.project.as_str() };
            let last: String =
                p.last_activity_at.as_deref().map(short_time).unwrap_or_default().chars().take(10).collect();
            project_lines.push(Line::from(format!(
                "{:<16} {:>5} {:>5}  {last}",
                one_line(name, 16),
                p.observations,
                p.sessions
            )));
        }
    } else {
        project_lines.push(Line::styled(d.error.clone().unwrap_or_else(|| "loading…".into()), DIM));
    }
    frame.render_widget(Paragraph::new(project_lines).block(block("Projects")), projects);

    let mut lines = Vec::new();
    if let Some(stats) = &d.stats {
        lines.push(Line::from(format!(
            "memories {} · pinned {} · deleted {}",
            stats.total_observations, stats.pinned_observations, stats.deleted_observations
        )));
        lines.push(Line::from(format!("sessions {} · prompts {}", stats.total_sessions, stats.total_prompts)));
        let review = d.pending_review.map(|n| format!(" · {n} to review")).unwrap_or_default();
        lines.push(Line::from(format!("relations {}{review}", stats.total_relations)));
        let model = match &stats.embedding_model {
            Some(model) => format!("model: {} ({})", clean(model, false), clean(&stats.semantic_search, false)),
            None => format!("model: {}", clean(&stats.semantic_search, false)),
        };
        lines.push(Line::from(model));
        if stats.embeddings_pending > 0 {
            lines.push(Line::from(format!("  {} memories waiting for a vector", stats.embeddings_pending)));
        }
    }
    lines.extend(sync_lines(d.sync.as_deref()).into_iter().map(|l| Line::from(clean(&l, false))));
    frame.render_widget(Paragraph::new(lines).block(block("Status")).wrap(Wrap { trim: true }), status);

    let items: Vec<ListItem> = d
        .recent
        .items
        .iter()
        .map(|m| {
            ListItem::new(format!(
                "{}  #{:<5} {:<10} {}",
                short_time(&m.updated_at),
                m.id,
                one_line(&m.kind, 10),
                clean(&m.title, false)
            ))
        })
        .collect();
    simple_list(frame, "Recent activity", items, &mut d.recent, recent);
    recent
}

// ----- search -------------------------------------------------------------------------

fn search(frame: &mut Frame, s: &mut SearchView, area: Rect) -> Rect {
    let [input, results] = Layout::vertical([Constraint::Length(4), Constraint::Min(3)]).areas(area);
    let cursor = if s.editing { "▏" } else { "" };
    let filters = format!(
        "project: {} · type: {} · scope: {}",
        s.project.as_deref().map_or("all".into(), |p| one_line(p, 20)),
        s.kind.as_deref().map_or("all".into(), |k| one_line(k, 16)),
        s.scope.map_or("all", |sc| if sc == cairn_core::text::Scope::Personal { "personal" } else { "project" }),
    );
    let lines = vec![
        Line::from(vec![Span::styled("/ ", HEADING), Span::raw(clean(&s.input, false)), Span::raw(cursor)]),
        Line::styled(filters, DIM),
    ];
    let input_block =
        if s.editing { block("Search").border_style(Style::new().fg(Color::Yellow)) } else { block("Search") };
    frame.render_widget(Paragraph::new(lines).block(input_block), input);

    let width = usize::from(results.width.saturating_sub(4));
    let items: Vec<ListItem> = s
        .results
        .items
        .iter()
        .map(|hit| {
            let m = &hit.hit.observation;
            let project =
                if m.project.is_empty() { String::new() } else { format!(" · {}", one_line(&m.project, 20)) };
            let pin = if m.pinned { " 📌" } else { "" };
            let mut lines = vec![
                Line::from(vec![
                    Span::styled(format!("#{:<5} ", m.id), DIM),
                    Span::styled(
                        one_line(&m.title, width.saturating_sub(30).max(10)),
                        Style::new().add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(format!(" [{}]{project}{pin}", one_line(&m.kind, 12)), DIM),
                ]),
                highlighted(&cut_snippet(&hit.hit.snippet, width)),
            ];
            for note in hit.annotations.iter().take(1) {
                lines.push(Line::styled(format!("  {}", one_line(note, width)), Style::new().fg(Color::Magenta)));
            }
            ListItem::new(lines)
        })
        .collect();
    let searching = s.sent > s.shown;
    let mode = s.response.as_ref().and_then(|r| r.mode).map(|m| format!(" · {m:?}").to_lowercase()).unwrap_or_default();
    let title = if searching {
        format!("Results (searching…){mode}")
    } else {
        format!("Results ({}){mode}", s.results.items.len())
    };
    let highlight = if s.editing { Style::new().add_modifier(Modifier::BOLD) } else { SELECTED };
    let widget = List::new(items).block(block(&title)).highlight_style(highlight);
    frame.render_stateful_widget(widget, results, &mut s.results.state);
    if !searching && s.results.items.is_empty() {
        let note = match (&s.results.error, s.shown_query.is_empty()) {
            (Some(e), _) => e.clone(),
            (None, true) => "type to search; Enter moves to the results".into(),
            (None, false) => "no memory matches".into(),
        };
        let inner = results.inner(ratatui::layout::Margin { horizontal: 1, vertical: 1 });
        frame.render_widget(Paragraph::new(clean(&note, false)).style(DIM).wrap(Wrap { trim: true }), inner);
    }
    results
}

/// A snippet kept to about two lines, counted without its `**` markers.
fn cut_snippet(snippet: &str, width: usize) -> String {
    let one = snippet.replace(['\n', '\r'], " ");
    let max = width.saturating_sub(2).max(10) + one.matches("**").count() * 2;
    format!("  {}", one_line(&one, max))
}

// ----- a memory -----------------------------------------------------------------------

fn detail(frame: &mut Frame, d: &mut Detail, area: Rect) {
    let title = match &d.memory {
        Some(m) => format!("#{} {}", m.observation.id, m.observation.title),
        None if !d.loading.is_empty() => format!("#{} (loading…)", d.id),
        None => format!("#{}", d.id),
    };
    let width = inner_width(area);
    let version = d.version;
    let (memory, timeline, relations, error) = (&d.memory, &d.timeline, &d.relations, &d.error);
    let wrapped = Wrapped::get(&mut d.wrapped, width, version, || detail_lines(memory, timeline, relations, error));
    scrolled(frame, &title, area, &mut d.scroll, wrapped);
}

fn detail_lines(
    memory: &Option<cairn_core::ops::GetResponse>,
    timeline: &Option<cairn_core::views::Timeline>,
    relations: &[cairn_core::relations::RelationRow],
    error: &Option<String>,
) -> Vec<(String, Style)> {
    let mut out: Vec<(String, Style)> = Vec::new();
    let plain = Style::default();
    if let Some(e) = error {
        out.push((e.clone(), Style::new().fg(Color::Red)));
    }
    let Some(got) = memory else { return out };
    let m = &got.observation;
    let project = if m.project.is_empty() { "(none)" } else { &m.project };
    out.push((format!("{} · {} · scope {}", clean(&m.kind, false), clean(project, false), scope_name(m.scope)), DIM));
    let mut flags = Vec::new();
    if m.pinned {
        flags.push("pinned".to_owned());
    }
    if let Some(deleted) = &m.deleted_at {
        flags.push(format!("DELETED {}", short_time(deleted)));
    }
    if let Some(key) = &m.topic_key {
        flags.push(format!("topic {}", clean(key, false)));
    }
    flags.push(format!("revision {}", m.revision_count));
    out.push((flags.join(" · "), DIM));
    out.push((format!("created {} · updated {}", short_time(&m.created_at), short_time(&m.updated_at)), DIM));
    out.push((String::new(), plain));
    out.push((clean(&m.content, true), plain));
    out.push((String::new(), plain));

    let revisions = got.revisions.as_deref().unwrap_or_default();
    out.push((format!("── Revisions ({})", revisions.len()), HEADING));
    for r in revisions {
        out.push((
            format!("r{} replaced {} · {}", r.revision, short_time(&r.replaced_at), one_line(&r.title, 80)),
            plain,
        ));
        out.push((format!("   {}", one_line(&r.content, 200)), DIM));
    }
    out.push((format!("── Relations ({})", relations.len()), HEADING));
    for r in relations {
        let other = if r.source_id == m.sync_id { &r.target_title } else { &r.source_title };
        let other = other.as_deref().unwrap_or("(gone)");
        out.push((
            format!("{} [{}] {}", clean(&r.relation, false), clean(&r.judgment_status, false), one_line(other, 80)),
            plain,
        ));
    }
    if let Some(t) = timeline {
        out.push((format!("── Timeline ({} in the session)", t.total_in_range), HEADING));
        for e in t.before.iter().chain(std::iter::once(&t.focus)).chain(t.after.iter()) {
            let o = &e.observation;
            let marker = if e.is_focus { "▶" } else { " " };
            let style = if e.is_focus { Style::new().add_modifier(Modifier::BOLD) } else { plain };
            out.push((
                format!("{marker} {} #{:<5} {}", short_time(&o.created_at), o.id, one_line(&o.title, 80)),
                style,
            ));
        }
    }
    out
}

fn scope_name(scope: cairn_core::text::Scope) -> &'static str {
    if scope == cairn_core::text::Scope::Personal { "personal" } else { "project" }
}

/// Wrapped lines in a frame, only the visible ones drawn, with a position in the title.
fn scrolled(frame: &mut Frame, title: &str, area: Rect, scroll: &mut Scroll, wrapped: &Wrapped) {
    let height = usize::from(area.height.saturating_sub(2));
    scroll.total = wrapped.lines.len();
    scroll.height = height;
    scroll.offset = scroll.offset.min(scroll.total.saturating_sub(height.max(1)));
    let visible: Vec<Line> = wrapped
        .lines
        .iter()
        .skip(scroll.offset)
        .take(height)
        .map(|(text, style)| Line::styled(text.clone(), *style))
        .collect();
    let position = if scroll.total > height {
        format!("{title} · {}–{}/{}", scroll.offset + 1, (scroll.offset + height).min(scroll.total), scroll.total)
    } else {
        title.to_owned()
    };
    frame.render_widget(Paragraph::new(Text::from(visible)).block(block(&position)), area);
}

// ----- conflicts and history ----------------------------------------------------------

fn conflicts(frame: &mut Frame, list: &mut ListView<cairn_core::relations::RelationRow>, area: Rect, judged: bool) {
    let items: Vec<ListItem> = list
        .items
        .iter()
        .map(|r| {
            let source = r.source_title.as_deref().unwrap_or("(gone)");
            let target = r.target_title.as_deref().unwrap_or("(gone)");
            let confidence = r.confidence.map(|c| format!(" {:.0}%", c * 100.0)).unwrap_or_default();
            let by = match (
                r.marked_by_kind.as_deref().filter(|_| r.judgment_status == "judged"),
                r.marked_by_model.as_deref(),
            ) {
                (Some(kind), Some(model)) => format!(" · by {} ({})", clean(kind, false), clean(model, false)),
                (Some(kind), None) => format!(" · by {}", clean(kind, false)),
                (None, _) => String::new(),
            };
            let mut lines = vec![
                Line::from(format!(
                    "{}{confidence}{by} · {}",
                    clean(&r.relation, false),
                    short_time(if judged { &r.updated_at } else { &r.created_at })
                )),
                Line::from(format!("  {}", clean(source, false))),
                Line::styled(format!("  ⟷ {}", clean(target, false)), DIM),
            ];
            if let Some(reason) = r.reason.as_deref().filter(|_| judged) {
                lines.push(Line::styled(format!("  {}", one_line(reason, 200)), DIM));
            }
            ListItem::new(lines)
        })
        .collect();
    let title = if judged { "Verdicts given" } else { "Conflicts to review" };
    simple_list(frame, title, items, list, area);
}

fn section_line(section: &Section) -> String {
    let first = |s: &str| one_line(s.lines().next().unwrap_or_default(), 200);
    match section {
        Section::Text { content, injected, .. } => {
            format!("[text{}] {}", if *injected { ", injected" } else { "" }, first(content))
        }
        Section::Reasoning { content, .. } => format!("[reasoning] {}", first(content)),
        Section::Tool { tool, status, content, .. } => {
            format!(
                "[tool {} {}] {}",
                clean(tool, false),
                clean(status, false),
                first(content.as_deref().unwrap_or(""))
            )
        }
        Section::Image { mime } => format!("[image {}]", clean(mime.as_deref().unwrap_or("?"), false)),
        Section::File { path, .. } => format!("[file {}]", clean(path.as_deref().unwrap_or("?"), false)),
    }
}

fn history_search(frame: &mut Frame, s: &mut HistorySearchView, area: Rect) -> Rect {
    let [input, results] = Layout::vertical([Constraint::Length(3), Constraint::Min(3)]).areas(area);
    let cursor = if s.editing { "▏" } else { "" };
    let line = Line::from(vec![Span::styled("/ ", HEADING), Span::raw(clean(&s.input, false)), Span::raw(cursor)]);
    frame.render_widget(Paragraph::new(line).block(block("Search the conversation history")), input);
    let items: Vec<ListItem> = s
        .results
        .items
        .iter()
        .map(|m| {
            let snippet = m.hits.first().and_then(|h| h.snippets.first()).map(String::as_str).unwrap_or_default();
            ListItem::new(vec![
                Line::styled(
                    format!("{} · turn {} · {}", one_line(&m.session_id, 24), m.turn_number, clean(&m.role, false)),
                    DIM,
                ),
                highlighted(&cut_snippet(snippet, usize::from(results.width.saturating_sub(4)))),
            ])
        })
        .collect();
    simple_list(frame, "Messages", items, &mut s.results, results);
    results
}

// ----- help ---------------------------------------------------------------------------

const HELP: &[(&str, &str)] = &[
    ("/ Enter", "search, run it (history screens: the history's search)"),
    ("↑ ↓ j k PgUp PgDn", "move or scroll; the mouse wheel too"),
    ("Enter → click", "open the selection (click twice on a row)"),
    ("Esc ← Backspace", "back"),
    ("g", "dashboard"),
    ("c", "conflicts: 1–6 give a verdict, v who judged what"),
    ("s", "conflicts: scan this project with the model (--write)"),
    ("h", "history: sessions › turns › messages › a part"),
    ("t", "trash: deleted memories; u restores one"),
    ("^P ^T ^O", "search filters: project, type, scope"),
    ("e d u p", "memory: edit in $EDITOR, delete, restore, pin (--write)"),
    ("r", "reload"),
    ("q ^C", "quit"),
];

fn draw_help(frame: &mut Frame, area: Rect) {
    let width = area.width.saturating_sub(4).min(76);
    let height = (HELP.len() as u16 + 4).min(area.height.saturating_sub(2));
    let popup = Rect { x: area.x + (area.width - width) / 2, y: area.y + (area.height - height) / 2, width, height };
    let mut lines: Vec<Line> = HELP
        .iter()
        .map(|(keys, what)| Line::from(vec![Span::styled(format!("{keys:<18} "), HEADING), Span::raw(*what)]))
        .collect();
    lines.push(Line::styled("any key closes this", DIM));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block("Keys")).wrap(Wrap { trim: true }), popup);
}
