//! The app driven key by key over a real store (a temp data dir, operations run in line),
//! and its screens rendered on ratatui's `TestBackend` and snapshotted as text.

use cairn_client::{Client, ConnectOptions, LocalKind};
use cairn_core::memory::NewObservation;
use cairn_core::ops::{Op, RelationStatsRequest, SaveRequest};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use crate::app::{App, Effect, Lane, Options, Response, View};

struct Harness {
    dir: tempfile::TempDir,
    client: Client,
    app: App,
    terminal: Terminal<TestBackend>,
}

fn client_of(dir: &std::path::Path, local: LocalKind) -> Client {
    Client::new(ConnectOptions::direct_to(dir, local))
}

fn save(client: &Client, project: &str, title: &str, content: &str) -> i64 {
    let observation = NewObservation {
        title: title.into(),
        content: content.into(),
        project: Some(project.into()),
        kind: Some("decision".into()),
        ..NewObservation::default()
    };
    let saved: cairn_core::ops::SaveResponse =
        client.call(SaveRequest { observation, ..SaveRequest::default() }).unwrap();
    saved.outcome.id
}

impl Harness {
    /// A store with a few memories; `write`: edits allowed.
    fn new(write: bool) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let writer = client_of(dir.path(), LocalKind::Store);
        save(&writer, "shop", "Auth uses JWT in cookies", "We keep the **token** in an httpOnly cookie.\nSecond line.");
        save(&writer, "shop", "Database is Postgres 16", "Chosen for JSONB and row-level security.");
        save(&writer, "blog", "Deploys go through CI", "Never deploy from a laptop.");
        drop(writer);
        let client = client_of(dir.path(), if write { LocalKind::Store } else { LocalKind::ReadOnly });
        let app = App::new(Options { write, connection: "file".into(), project: Some("shop".into()) });
        let terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        let mut h = Harness { dir, client, app, terminal };
        h.pump();
        h
    }

    /// Run every queued operation and hand its answer back, until nothing is queued.
    fn pump(&mut self) {
        while !self.app.outbox.is_empty() {
            for request in std::mem::take(&mut self.app.outbox) {
                let result = self.client.run(request.op);
                self.app.on_response(Response { id: request.id, result });
            }
        }
    }

    fn key(&mut self, code: KeyCode) {
        self.app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
        self.pump();
    }

    fn ctrl(&mut self, c: char) {
        self.app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
        self.pump();
    }

    fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.key(KeyCode::Char(c));
        }
    }

    fn screen(&mut self) -> String {
        self.terminal.draw(|frame| crate::ui::draw(frame, &mut self.app)).unwrap();
        let buffer = self.terminal.backend().buffer();
        let mut out = String::new();
        for y in 0..buffer.area.height {
            let line: String = (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    fn resize(&mut self, width: u16, height: u16) {
        self.terminal.backend_mut().resize(width, height);
    }
}

/// Times change with every run; the layout does not.
macro_rules! assert_screen {
    ($name:expr, $screen:expr) => {
        insta::with_settings!({filters => vec![
            (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "[time]"),
            (r"\d{4}-\d{2}-\d{2}", "[date]"),
        ]}, {
            insta::assert_snapshot!($name, $screen);
        });
    };
}

#[test]
fn the_dashboard_shows_projects_counts_recent_activity_and_status() {
    let mut h = Harness::new(false);
    let screen = h.screen();
    assert!(screen.contains("sync: off"), "{screen}");
    assert_screen!("dashboard", screen);
}

#[test]
fn the_dashboard_says_which_hub_the_data_dir_syncs_with_and_how_it_stands() {
    let mut h = Harness::new(false);
    let config = "[sync]\nremote = \"http://127.0.0.1:9\"\ntoken = \"chub_test\"\nprojects = [\"shop\"]\n";
    std::fs::write(h.dir.path().join("config.toml"), config).unwrap();
    h.key(KeyCode::Char('r'));
    let screen = h.screen();
    // No daemon runs here, so nothing syncs now; the hub and what waits for it are shown.
    assert!(screen.contains("sync: no_daemon · 0 pending"), "{screen}");
    assert!(screen.contains("hub http://127.0.0.1:9"), "{screen}");
}

#[test]
fn slash_types_a_query_enter_runs_it_and_opens_a_memory() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Char('/'));
    assert!(matches!(h.app.view(), View::Search(s) if s.editing));
    // `q` and `c` are letters of the query here, not commands.
    h.type_text("cookie");
    assert!(!h.app.quit);
    let View::Search(s) = h.app.view() else { panic!("not searching") };
    assert_eq!(s.input, "cookie");
    assert_eq!(s.results.items.len(), 1, "results come as you type");
    h.key(KeyCode::Enter);
    let View::Search(s) = h.app.view() else { panic!("not searching") };
    assert!(!s.editing, "Enter moves to the results");
    assert_screen!("search_results", h.screen());
    h.key(KeyCode::Enter);
    assert!(matches!(h.app.view(), View::Detail(d) if d.memory.is_some() && d.timeline.is_some()));
    let screen = h.screen();
    assert!(screen.contains("httpOnly cookie"), "{screen}");
    assert_screen!("memory_detail", screen);
    h.key(KeyCode::Esc);
    assert!(matches!(h.app.view(), View::Search(_)));
    h.key(KeyCode::Char('q'));
    assert!(h.app.quit);
}

#[test]
fn a_newer_answer_is_never_replaced_by_an_older_one() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Char('/'));
    h.app.on_key(KeyEvent::new(KeyCode::Char('J'), KeyModifiers::NONE));
    h.app.on_key(KeyEvent::new(KeyCode::Char('W'), KeyModifiers::NONE));
    h.app.on_key(KeyEvent::new(KeyCode::Char('T'), KeyModifiers::NONE));
    let requests = std::mem::take(&mut h.app.outbox);
    assert!(requests.iter().all(|r| r.lane == Lane::NewestOnly), "searches replace each other in the worker");
    let mut answers: Vec<Response> =
        requests.into_iter().map(|r| Response { id: r.id, result: h.client.run(r.op) }).collect();
    // The newest answer arrives first; the older ones after it are dropped.
    answers.reverse();
    for answer in answers {
        h.app.on_response(answer);
    }
    let View::Search(s) = h.app.view() else { panic!("not searching") };
    assert_eq!(s.shown, s.sent);
    assert_eq!(s.shown_query, "JWT");
    assert_eq!(s.results.items[0].hit.observation.title, "Auth uses JWT in cookies");
}

#[test]
fn filters_cycle_through_the_known_projects() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Char('/'));
    h.type_text("d");
    h.ctrl('p');
    let View::Search(s) = h.app.view() else { panic!("not searching") };
    let first = s.project.clone().expect("a project filter");
    assert!(s.results.items.iter().all(|hit| hit.hit.observation.project == first));
    h.ctrl('p');
    h.ctrl('p');
    let View::Search(s) = h.app.view() else { panic!("not searching") };
    assert_eq!(s.project, None, "after the last project: all of them again");
    h.ctrl('o');
    let View::Search(s) = h.app.view() else { panic!("not searching") };
    assert_eq!(s.scope, Some(cairn_core::text::Scope::Project));
}

#[test]
fn read_only_refuses_edits_and_says_how_to_allow_them() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Enter);
    assert!(matches!(h.app.view(), View::Detail(_)));
    for key in ['p', 'd', 'e', 'u'] {
        h.key(KeyCode::Char(key));
        assert!(h.app.status.contains("--write"), "{key}: {}", h.app.status);
        assert!(h.app.outbox.is_empty() && h.app.effect.is_none());
    }
}

#[test]
fn with_write_a_memory_is_pinned_edited_and_deleted() {
    let mut h = Harness::new(true);
    h.key(KeyCode::Enter);
    let id = match h.app.view() {
        View::Detail(d) => d.id,
        _ => panic!("not a memory"),
    };
    h.key(KeyCode::Char('p'));
    assert!(h.app.status.contains("pinned"), "{}", h.app.status);
    assert!(matches!(h.app.view(), View::Detail(d) if d.memory.as_ref().unwrap().observation.pinned));

    h.key(KeyCode::Char('e'));
    let Some(Effect::Edit { id: edited, content }) = h.app.effect.take() else { panic!("no edit asked") };
    assert_eq!(edited, id);
    h.app.edited(id, &content, Ok("new content".into()));
    h.pump();
    assert!(matches!(h.app.view(), View::Detail(d) if d.memory.as_ref().unwrap().observation.content == "new content"));
    let View::Detail(d) = h.app.view() else { panic!("not a memory") };
    assert_eq!(d.memory.as_ref().unwrap().revisions.as_ref().map(Vec::len), Some(1), "the edit left a revision");

    h.key(KeyCode::Char('d'));
    h.key(KeyCode::Down);
    h.key(KeyCode::Char('y'));
    assert_eq!(h.app.status, "kept", "only the very next key confirms");
    h.key(KeyCode::Char('d'));
    assert!(h.app.outbox.is_empty(), "a delete waits for y");
    h.key(KeyCode::Char('y'));
    assert!(h.app.status.contains("deleted"), "{}", h.app.status);
    assert!(h.screen().contains("DELETED"), "the memory stays on screen, marked");
    h.key(KeyCode::Char('u'));
    assert!(h.app.status.contains("restored"), "{}", h.app.status);
    assert!(
        matches!(h.app.view(), View::Detail(d) if d.error.is_none() && d.memory.as_ref().unwrap().observation.deleted_at.is_none())
    );

    // From the trash too.
    h.key(KeyCode::Char('d'));
    h.key(KeyCode::Char('y'));
    h.key(KeyCode::Char('t'));
    assert!(matches!(h.app.view(), View::Trash(l) if l.items.len() == 1 && l.items[0].id == id));
    h.key(KeyCode::Char('u'));
    assert!(matches!(h.app.view(), View::Trash(l) if l.items.is_empty() && l.loading.is_none()));
}

#[test]
fn the_conflicts_queue_and_the_history_open_from_the_dashboard() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Char('c'));
    assert!(matches!(h.app.view(), View::Conflicts(l) if l.loading.is_none() && l.error.is_none()));
    assert!(h.screen().contains("Conflicts to review (0)"));
    h.key(KeyCode::Char('1'));
    assert!(h.app.status.contains("read-only"), "{}", h.app.status);
    h.key(KeyCode::Esc);
    h.key(KeyCode::Char('h'));
    assert!(matches!(h.app.view(), View::Sessions(l) if l.loading.is_none()), "{:?}", h.app.view());
    h.key(KeyCode::Char('/'));
    assert!(matches!(h.app.view(), View::HistorySearch(s) if s.editing), "/ searches the history here");
    h.type_text("deploy");
    h.key(KeyCode::Enter);
    assert!(matches!(h.app.view(), View::HistorySearch(s) if s.results.loading.is_none()));
}

#[test]
fn help_opens_on_question_mark_and_any_key_closes_it() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Char('?'));
    assert!(h.app.help);
    assert_screen!("help", h.screen());
    h.key(KeyCode::Char('q'));
    assert!(!h.app.help && !h.app.quit, "q closes the help first");
}

#[test]
fn a_small_terminal_gets_a_message_not_a_broken_layout() {
    let mut h = Harness::new(false);
    h.resize(30, 8);
    let screen = h.screen();
    assert!(screen.contains("Terminal too small: 30×8"), "{screen}");
    assert!(screen.contains("50×12"), "{screen}");
    h.resize(1, 1);
    h.screen();
}

#[test]
fn escape_sequences_in_a_title_never_reach_the_terminal() {
    let mut h = Harness::new(false);
    let writer = client_of(h.dir.path(), LocalKind::Store);
    save(&writer, "shop", "\u{1b}[2J\u{1b}]0;pwned\u{7} evil \u{9b}31m title", "body \u{1b}[31mred");
    h.key(KeyCode::Char('g'));
    let screen = h.screen();
    assert!(!screen.chars().any(|c| c.is_control() && c != '\n'), "{screen:?}");
    assert!(screen.contains("␛[2J"), "{screen}");
    h.key(KeyCode::Enter);
    let screen = h.screen();
    assert!(!screen.chars().any(|c| c.is_control() && c != '\n'), "{screen:?}");
}

/// Saves cap content at 50 KB, but an imported or older store may hold more: the answer is
/// made here, and the rest of the page comes from the store.
#[test]
fn a_megabyte_memory_scrolls_to_its_end() {
    let mut h = Harness::new(false);
    let line = "0123456789 ".repeat(9);
    let big: String = (0..10_000).map(|i| format!("{i:05} {line}\n")).collect();
    assert!(big.len() > 1_000_000);
    h.app.open_memory(1);
    for request in std::mem::take(&mut h.app.outbox) {
        let mut result = h.client.run(request.op);
        if let Ok(cairn_core::ops::OpOutput::Get(got)) = &mut result {
            got.observation.content.clone_from(&big);
        }
        h.app.on_response(Response { id: request.id, result });
    }
    h.pump();
    h.screen();
    for _ in 0..100 {
        h.key(KeyCode::PageDown);
        h.screen();
    }
    h.key(KeyCode::End);
    let screen = h.screen();
    let View::Detail(d) = h.app.view() else { panic!("not a memory") };
    assert!(d.scroll.total > 10_000, "{}", d.scroll.total);
    assert!(screen.contains("Timeline"), "the end of the page is shown: {screen}");
}

#[test]
fn the_mouse_wheel_moves_and_a_second_click_opens() {
    let mut h = Harness::new(false);
    h.screen();
    let wheel = MouseEvent { kind: MouseEventKind::ScrollDown, column: 5, row: 15, modifiers: KeyModifiers::NONE };
    h.app.on_mouse(wheel);
    let View::Dashboard(d) = h.app.view() else { panic!("not the dashboard") };
    assert_eq!(d.recent.state.selected(), Some(2), "three rows down, kept in the list");
    let area = h.app.list_area;
    let click = MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: area.x + 3,
        row: area.y + 1,
        modifiers: KeyModifiers::NONE,
    };
    h.app.on_mouse(click);
    assert!(matches!(h.app.view(), View::Dashboard(d) if d.recent.state.selected() == Some(0)));
    h.app.on_mouse(click);
    h.pump();
    assert!(matches!(h.app.view(), View::Detail(_)));
}

#[test]
fn ctrl_c_quits_even_while_typing() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Char('/'));
    h.ctrl('c');
    assert!(h.app.quit);
}

#[test]
fn a_verdict_is_one_key_in_the_conflicts_queue() {
    let mut h = Harness::new(true);
    let observation = NewObservation {
        title: "Auth uses JWT in cookies, not headers".into(),
        content: "We keep the token in an httpOnly cookie, never in a header.".into(),
        project: Some("shop".into()),
        kind: Some("decision".into()),
        ..NewObservation::default()
    };
    let saved: cairn_core::ops::SaveResponse =
        h.client.call(SaveRequest { observation, find_candidates: true, ..SaveRequest::default() }).unwrap();
    assert!(!saved.candidates.is_empty(), "the look-alike waits for a verdict");
    h.key(KeyCode::Char('c'));
    let View::Conflicts(list) = h.app.view() else { panic!("not the conflicts") };
    let waiting = list.items.len();
    assert!(waiting >= 1);
    assert_screen!("conflicts", h.screen());
    h.key(KeyCode::Char('2'));
    assert_eq!(h.app.status, "judged: compatible");
    assert!(matches!(h.app.view(), View::Conflicts(l) if l.items.len() == waiting - 1));
    h.key(KeyCode::Char('9'));
    assert_eq!(h.app.status, "judged: compatible", "not a verdict key: nothing happens");
    h.key(KeyCode::Char('v'));
    let View::Conflicts(list) = h.app.view() else { panic!("not the conflicts") };
    let given = list.items.iter().find(|r| r.relation == "compatible").expect("the verdict is listed");
    assert_eq!(given.marked_by_kind.as_deref(), Some("person"), "a verdict in the TUI is a person's");
    let screen = h.screen();
    assert!(screen.contains("Verdicts given") && screen.contains("by person"), "{screen}");
    h.key(KeyCode::Char('v'));
    assert!(h.screen().contains("Conflicts to review"));
}

/// Five decisions on one cache key scheme, the last replacing the others in other words: a
/// scan finds pairs among them (as the HTTP scan test's).
fn cache_key_decisions(client: &Client) {
    let texts = [
        ("Product cache key scheme", "Product cache keys are product:{id}."),
        ("Product cache key scheme: add locale", "Product cache keys are product:{id}:{locale}."),
        ("Product cache key scheme: add currency", "Product cache keys are product:{id}:{locale}:{currency}."),
        ("Product cache key scheme: version prefix", "Product cache keys are v2:product:{id}:{locale}:{currency}."),
        (
            "Catalogue entries cached by content hash",
            "We no longer build product cache keys from the id, locale and currency: an entry is keyed by the \
             sha256 of its rendered JSON, so any change invalidates it by itself.",
        ),
    ];
    for (title, content) in texts {
        save(client, "shop", title, content);
    }
}

/// A harness over an engine in this process (the daemon's runtime, which runs a semantic
/// scan), judging with a scripted model: unsure of any pair with the content-hash memory,
/// sure the others are compatible.
fn harness_over_a_judging_engine() -> (Harness, std::sync::Arc<cairn_engine::Engine>) {
    use cairn_llm::scripted::ScriptedProvider;
    let dir = tempfile::tempdir().unwrap();
    let engine = cairn_engine::Engine::open(&dir.path().join(cairn_core::store::DB_FILE)).unwrap();
    engine.set_llm(Some(std::sync::Arc::new(ScriptedProvider::new(|_, request| {
        let asked = request.messages.iter().map(|m| m.content.as_str()).collect::<String>();
        Ok(if asked.contains("sha256") {
            r#"{"relation": "supersedes", "confidence": 0.3, "reason": "maybe"}"#.into()
        } else {
            r#"{"relation": "compatible", "confidence": 0.9, "reason": "both hold"}"#.into()
        })
    }))));
    let client = Client::in_process(std::sync::Arc::clone(&engine));
    cache_key_decisions(&client);
    let app = App::new(Options { write: true, connection: "engine".into(), project: Some("shop".into()) });
    let terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut h = Harness { dir, client, app, terminal };
    h.pump();
    (h, engine)
}

#[test]
fn s_scans_the_project_in_batches_off_the_ui_and_the_pairs_left_pending_are_listed() {
    let (mut h, engine) = harness_over_a_judging_engine();
    h.key(KeyCode::Char('c'));
    assert!(matches!(h.app.view(), View::Conflicts(l) if l.items.is_empty()), "nothing to review before the scan");

    h.app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
    assert_eq!(h.app.status, "scanning shop for conflicting memories…");
    let first = std::mem::take(&mut h.app.outbox);
    assert!(
        matches!(&first[..], [r] if r.lane == Lane::Long && matches!(&r.op, Op::ScanRelations(s) if s.semantic && s.apply && s.project == "shop")),
        "one semantic batch, recorded, on the long lane: {first:?}"
    );
    h.key(KeyCode::Char('s'));
    assert_eq!(h.app.status, "a scan of shop is under way", "one scan at a time");
    let result = h.client.run(first[0].op.clone());
    h.app.on_response(Response { id: first[0].id, result });
    assert!(h.app.status.starts_with("scanning shop… 4 of "), "{}", h.app.status);
    h.pump();

    let status = h.app.status.clone();
    assert!(h.app.scan.is_none(), "the scan ended: {status}");
    let stats: cairn_core::relations::RelationStats =
        h.client.call(RelationStatsRequest { project: Some("shop".into()) }).unwrap();
    let judged = stats.by_relation.get("compatible").copied().unwrap_or(0);
    let pending = stats.by_judgment_status.get("pending").copied().unwrap_or(0);
    assert!(judged > 4, "more than one batch judged: {stats:?}");
    assert_eq!(status, format!("shop: {judged} pairs judged, {pending} pending"));
    let View::Conflicts(list) = h.app.view() else { panic!("not the conflicts") };
    assert_eq!(list.items.len() as i64, pending, "the list was reloaded: {list:?}");

    h.key(KeyCode::Char('v'));
    let View::Conflicts(given) = h.app.view() else { panic!("not the conflicts") };
    let by_model =
        given.items.iter().filter(|r| r.marked_by_kind.as_deref() == Some("llm") && r.relation == "compatible");
    assert_eq!(by_model.count() as i64, judged, "the model's verdicts are listed: {:?}", given.items);
    let screen = h.screen();
    assert!(screen.contains("by llm (scripted-1)") && screen.ends_with(&format!("{status}\n")), "{screen}");
    assert_screen!("conflicts_scanned", screen);
    engine.stop(std::time::Duration::from_secs(10));
}

#[test]
fn a_scan_without_a_model_or_in_read_only_says_why_on_the_status_line() {
    let mut h = Harness::new(false);
    h.key(KeyCode::Char('c'));
    h.key(KeyCode::Char('s'));
    assert!(h.app.status.contains("read-only") && h.app.scan.is_none(), "{}", h.app.status);

    // The file, as without a daemon: no model judges here.
    let mut h = Harness::new(true);
    h.key(KeyCode::Char('c'));
    h.key(KeyCode::Char('s'));
    assert!(h.app.status.starts_with("error[llm_not_configured]"), "{}", h.app.status);
    assert!(h.app.scan.is_none(), "a failed scan can be started again");
    assert!(matches!(h.app.view(), View::Conflicts(l) if l.error.is_none()), "the list stays");
    assert!(h.screen().contains("error[llm_not_configured]"));

    h.app.options.project = None;
    h.key(KeyCode::Char('s'));
    assert!(h.app.status.starts_with("no project here"), "{}", h.app.status);
}
