//! The router's `plans` and `context_usage` history ops: `plans` on temp directories (order, read,
//! every refused name, a symlink out, a missing directory) and `context_usage` on hand-built
//! sessions of both hosts (token shapes, thresholds, trend, no usage, which session).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::context_usage::{ContextUsageRequest, UsageSource, context_usage, context_usage_turns};
use super::model::*;
use super::plans::{MAX_READ_BYTES, PlanLocation, plan_dirs, plans};
use super::store::{HistoryDb, SourceRef};
use cairn_base::context_window::MeterStatus;
use cairn_base::error::ErrorCode;
use cairn_base::settings::plugin::PluginConfig;

fn write_plan(dir: &Path, name: &str, body: &str, age_secs: u64) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    let when = SystemTime::now() - Duration::from_secs(age_secs);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
    path
}

/// A data dir (`XDG_DATA_HOME`) and a git project with plans in both of OpenCode's places.
struct PlanFixture {
    tmp_dir: tempfile::TempDir,
    xdg: PathBuf,
    project: PathBuf,
}

impl PlanFixture {
    fn new() -> PlanFixture {
        let tmp = tempfile::tempdir().unwrap();
        let xdg = tmp.path().join("xdg");
        let project = tmp.path().join("repo");
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::create_dir_all(project.join("src")).unwrap();
        let global = xdg.join("opencode").join("plans");
        write_plan(&global, "1767000000000-old-river.md", "intro\n# Old plan\n\nsteps", 300);
        write_plan(&global, "1767000100000-quiet-lake.md", "no heading at all", 100);
        write_plan(&global, "notes.txt", "# not a plan", 10);
        write_plan(&global, ".hidden.md", "# hidden", 10);
        let local = project.join(".opencode").join("plans");
        write_plan(&local, "1767000200000-brave-fox.md", "## Ship the | router\nbody", 5);
        PlanFixture { tmp_dir: tmp, xdg, project }
    }

    fn env(&self) -> impl Fn(&str) -> Option<String> + '_ {
        move |name| (name == "XDG_DATA_HOME").then(|| self.xdg.display().to_string())
    }

    fn dirs(&self) -> Vec<(PlanLocation, PathBuf)> {
        plan_dirs(&self.env(), Some(&self.project.join("src")))
    }

    fn global(&self) -> PathBuf {
        self.xdg.join("opencode").join("plans")
    }
}

#[test]
fn plans_are_listed_newest_first_from_both_places() {
    let f = PlanFixture::new();
    let dirs = f.dirs();
    assert_eq!(
        dirs,
        vec![(PlanLocation::Project, f.project.join(".opencode").join("plans")), (PlanLocation::Global, f.global())]
    );
    let listing = plans(&dirs, None).unwrap();
    let names: Vec<&str> = listing.plans.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["1767000200000-brave-fox.md", "1767000100000-quiet-lake.md", "1767000000000-old-river.md"]);
    assert_eq!(listing.total, 3);
    let fox = &listing.plans[0];
    assert_eq!(
        (fox.location, fox.size, fox.heading.as_deref()),
        (PlanLocation::Project, 25, Some("Ship the | router"))
    );
    assert_eq!(listing.plans[1].heading, None);
    assert_eq!(listing.plans[2].heading.as_deref(), Some("Old plan"));
    assert!(listing.plans.iter().all(|p| p.modified.ends_with('Z')));
    let table = listing.to_markdown();
    assert!(table.starts_with("| name | where | size | modified | first heading |\n"), "{table}");
    assert!(table.contains("| 1767000200000-brave-fox.md | project | 25 | "), "{table}");
    assert!(table.contains("Ship the \\| router"), "a pipe in a heading is escaped: {table}");
    assert!(table.contains("3 plans, newest first"), "{table}");

    // Outside a git project OpenCode writes only to the data dir.
    let outside = plan_dirs(&f.env(), Some(Path::new("/")));
    assert_eq!(outside, vec![(PlanLocation::Global, f.global())]);
    // HOME when XDG_DATA_HOME is not set, as OpenCode's own data dir.
    let home = plan_dirs(&|n: &str| (n == "HOME").then(|| "/home/u".to_owned()), None);
    assert_eq!(home, vec![(PlanLocation::Global, PathBuf::from("/home/u/.local/share/opencode/plans"))]);
}

#[test]
fn a_plan_is_read_in_full_or_bounded() {
    let f = PlanFixture::new();
    let dirs = f.dirs();
    let read = plans(&dirs, Some("1767000000000-old-river.md")).unwrap();
    let plan = read.plan.unwrap();
    assert_eq!(
        (plan.location, plan.text.as_str(), plan.truncated),
        (PlanLocation::Global, "intro\n# Old plan\n\nsteps", false)
    );
    assert!(read.plans.is_empty());
    let big = "é".repeat(MAX_READ_BYTES); // two bytes each: cut in the middle of the file
    write_plan(&f.global(), "1767000300000-long-road.md", &format!("# Long\n{big}"), 1);
    let read = plans(&dirs, Some("1767000300000-long-road.md")).unwrap();
    let md = read.to_markdown();
    let plan = read.plan.unwrap();
    assert!(plan.truncated && plan.text.len() <= MAX_READ_BYTES && plan.text.ends_with('é'));
    assert_eq!(plan.size as usize, "# Long\n".len() + 2 * MAX_READ_BYTES);
    assert!(md.contains("[truncated: the first 65,535 of 131,079 bytes shown]"), "{}", &md[md.len() - 80..]);
    // `<private>` never leaves a plan.
    write_plan(&f.global(), "1767000400000-secret.md", "# Keys <private>sk-123</private>\n", 1);
    let read = plans(&dirs, Some("1767000400000-secret.md")).unwrap();
    assert!(!read.plan.unwrap().text.contains("sk-123"));
}

#[test]
fn names_that_are_not_a_plain_md_file_are_refused() {
    let f = PlanFixture::new();
    let dirs = f.dirs();
    std::fs::write(f.xdg.join("opencode").join("secret.md"), "# outside").unwrap();
    let outside = f.tmp_dir.path().join("elsewhere.md");
    std::fs::write(&outside, "# elsewhere").unwrap();
    std::os::unix::fs::symlink(&outside, f.global().join("1767000500000-link-out.md")).unwrap();
    std::os::unix::fs::symlink(
        f.global().join("1767000000000-old-river.md"),
        f.global().join("1767000600000-link-in.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(f.tmp_dir.path().join("nothing.md"), f.global().join("1767000700000-dangling.md"))
        .unwrap();
    std::fs::create_dir(f.global().join("1767000800000-a-dir.md")).unwrap();
    let abs = outside.display().to_string();
    for bad in [
        "../secret.md",
        "..",
        "../../../../etc/passwd",
        abs.as_str(),
        "/etc/hosts.md",
        "sub/x.md",
        "..\\secret.md",
        "x.md\0.txt",
        ".md",
        ".hidden.md",
        "notes.txt",
        "plan.MD",
        "1767000500000-link-out.md",
        "1767000700000-dangling.md",
        "1767000800000-a-dir.md",
        "",
        "  ",
    ] {
        let err = plans(&dirs, Some(bad)).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument, "{bad:?}: {}", err.message);
    }
    // A symlink to a plan beside it is that plan.
    let read = plans(&dirs, Some("1767000600000-link-in.md")).unwrap();
    assert_eq!(read.plan.unwrap().text, "intro\n# Old plan\n\nsteps");
    // The refused ones are not listed either.
    let names: Vec<String> = plans(&dirs, None).unwrap().plans.into_iter().map(|p| p.name).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(!names.iter().any(|n| n.contains("link-out") || n.contains("dangling") || n.contains("a-dir")));
    let err = plans(&dirs, Some("1767009999999-missing.md")).unwrap_err();
    assert_eq!(err.code, ErrorCode::FileNotFound, "{}", err.message);
}

#[test]
fn missing_plan_directories_are_an_empty_list() {
    let tmp = tempfile::tempdir().unwrap();
    let xdg = tmp.path().display().to_string();
    let dirs = plan_dirs(&|n: &str| (n == "XDG_DATA_HOME").then(|| xdg.clone()), None);
    let listing = plans(&dirs, None).unwrap();
    assert!(listing.plans.is_empty() && listing.total == 0);
    assert!(!listing.directories[0].exists);
    assert!(listing.to_markdown().starts_with("No OpenCode plans in "), "{}", listing.to_markdown());
    assert_eq!(plans(&dirs, Some("x.md")).unwrap_err().code, ErrorCode::FileNotFound);
    assert!(plans(&[], None).unwrap().plans.is_empty());
}

// ---- context_usage ------------------------------------------------------------------------------

fn session(id: &str, host: HistoryHost, parent: Option<&str>, updated: &str) -> HistorySession {
    HistorySession {
        id: id.into(),
        host,
        project: Some("shop".into()),
        directory: None,
        parent_id: parent.map(Into::into),
        title: None,
        agent: None,
        model: None,
        created_at: "2026-03-01T10:00:00.000Z".into(),
        updated_at: updated.into(),
    }
}

fn answer(session: &str, id: &str, seq: i64, tokens: serde_json::Value, model: &str) -> HistoryMessage {
    HistoryMessage {
        tokens: Some(tokens.to_string()),
        model: Some(model.into()),
        ..HistoryMessage::new(session, id, HistoryRole::Assistant, seq, &format!("2026-03-01T10:00:{seq:02}.000Z"))
    }
}

/// An OpenCode session (two answers and one still streaming), a Claude Code one (an answer
/// written as two records, a 1M model), a sub-agent updated last, and a session with no usage.
fn usage_db() -> HistoryDb {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let oc = "ses_oc";
    let cc = "5f0c2a9e-0000-4000-8000-00000000cc01";
    let claude = |input: u64, created: u64, read: u64| {
        json!({"input_tokens": input, "cache_creation_input_tokens": created, "cache_read_input_tokens": read,
            "output_tokens": 50})
    };
    let batch = IngestBatch {
        sessions: vec![
            session(oc, HistoryHost::OpenCode, None, "2026-03-01T10:00:05.000Z"),
            session(cc, HistoryHost::ClaudeCode, None, "2026-03-01T10:00:09.000Z"),
            session("agent-1", HistoryHost::ClaudeCode, Some(cc), "2026-03-01T10:00:30.000Z"),
            session("ses_quiet", HistoryHost::OpenCode, None, "2026-03-01T10:00:01.000Z"),
        ],
        messages: vec![
            HistoryMessage::new(oc, "u1", HistoryRole::User, 1, "2026-03-01T10:00:01.000Z"),
            answer(
                oc,
                "a1",
                2,
                json!({"input": 100_000, "output": 2_000, "reasoning": 0, "cache": {"read": 20_000, "write": 0}}),
                "claude-sonnet-4",
            ),
            answer(
                oc,
                "a2",
                3,
                json!({"total": 150_000, "input": 1, "output": 1, "cache": {"read": 0, "write": 0}}),
                "claude-sonnet-4",
            ),
            answer(
                oc,
                "a3",
                4,
                json!({"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}),
                "claude-sonnet-4",
            ),
            answer(cc, "c1", 1, claude(10, 100_000, 200_000), "claude-opus-4-6[1m]"),
            answer(cc, "c2", 2, claude(5, 3_000, 300_100), "claude-opus-4-6[1m]"),
            answer(cc, "c2b", 3, claude(5, 3_000, 300_100), "claude-opus-4-6[1m]"),
            HistoryMessage::new("ses_quiet", "q1", HistoryRole::User, 1, "2026-03-01T10:00:01.000Z"),
        ],
        ..IngestBatch::default()
    };
    let source = SourceRef { key: "test".into(), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor::default()).unwrap();
    db
}

fn measure(db: &HistoryDb, session: Option<&str>, caller: Option<&str>) -> super::context_usage::ContextUsageReport {
    let req = ContextUsageRequest {
        session_id: session.map(Into::into),
        caller_session_id: caller.map(Into::into),
        limit: None,
    };
    context_usage(db, &req, &PluginConfig::default().context_meter).unwrap()
}

#[test]
fn opencode_usage_counts_total_or_the_sum_and_the_trend() {
    let db = usage_db();
    let r = measure(&db, Some("ses_oc"), None);
    assert_eq!((r.used, r.limit, r.percent), (Some(150_000), Some(200_000), Some(75)));
    assert_eq!((r.status, r.model.as_deref()), (Some(MeterStatus::Yellow), Some("claude-sonnet-4")));
    assert_eq!(r.message_id.as_deref(), Some("a2"), "the streaming answer with zero tokens is skipped");
    assert_eq!((r.delta, r.trend.as_deref()), (Some(28_000), Some("+28,000 tokens since the last answer")));
    assert_eq!((r.source, r.host), (UsageSource::Given, Some(HistoryHost::OpenCode)));
    assert_eq!(
        r.note,
        "session ses_oc: 75% used (150,000 / 200,000 tokens, claude-sonnet-4), yellow; +28,000 tokens since the last answer."
    );
}

#[test]
fn claude_code_usage_counts_the_input_side_against_a_1m_window() {
    let db = usage_db();
    let cc = "5f0c2a9e-0000-4000-8000-00000000cc01";
    let r = measure(&db, Some(cc), None);
    assert_eq!((r.used, r.limit, r.percent), (Some(303_105), Some(1_000_000), Some(30)));
    assert_eq!(r.status, Some(MeterStatus::Green));
    // c2b repeats c2's usage (one answer, two records): the trend is against c1.
    assert_eq!(r.delta, Some(303_105 - 300_010));
    assert_eq!(r.trend.as_deref(), Some("+3,095 tokens since the last answer"));
}

#[test]
fn thresholds_follow_the_context_meter_settings() {
    let db = usage_db();
    let mut settings = PluginConfig::default().context_meter;
    let req = ContextUsageRequest { session_id: Some("ses_oc".into()), ..Default::default() };
    settings.default_limit = 160_000; // 150,000 of it: 93 %
    assert_eq!(context_usage(&db, &req, &settings).unwrap().status, Some(MeterStatus::Critical));
    settings.default_limit = 170_000; // 88 %
    assert_eq!(context_usage(&db, &req, &settings).unwrap().status, Some(MeterStatus::Red));
    settings.default_limit = 1_000_000; // 15 %
    let r = context_usage(&db, &req, &settings).unwrap();
    assert_eq!((r.percent, r.status), (Some(15), Some(MeterStatus::Green)));
    // A window the caller knows (the plugin's, from its provider) wins over the default; 0 is none.
    let known = ContextUsageRequest { limit: Some(300_000), ..req.clone() };
    let r = context_usage(&db, &known, &settings).unwrap();
    assert_eq!((r.percent, r.limit, r.status), (Some(50), Some(300_000), Some(MeterStatus::Green)));
    let zero = ContextUsageRequest { limit: Some(0), ..req.clone() };
    assert_eq!(context_usage(&db, &zero, &settings).unwrap().limit, Some(1_000_000));
    let huge = ContextUsageRequest { limit: Some(1 << 63), ..req };
    assert_eq!(context_usage(&db, &huge, &settings).unwrap_err().code, ErrorCode::InvalidArgument);
}

#[test]
fn no_usage_is_an_answer_and_the_session_is_named() {
    let db = usage_db();
    let r = measure(&db, Some("ses_quiet"), None);
    assert_eq!((r.used, r.percent, r.status, r.trend), (None, None, None, None));
    assert!(r.note.contains("no assistant answer with token usage yet"), "{}", r.note);
    // The caller's own session when the door knows it.
    let r = measure(&db, None, Some("ses_oc"));
    assert_eq!((r.source, r.session_id.as_deref()), (UsageSource::Caller, Some("ses_oc")));
    assert!(r.note.starts_with("your session ses_oc: "), "{}", r.note);
    // Else the most recently updated main session (not the sub-agent updated later), said so.
    let r = measure(&db, None, None);
    assert_eq!(
        (r.source, r.session_id.as_deref()),
        (UsageSource::Latest, Some("5f0c2a9e-0000-4000-8000-00000000cc01"))
    );
    assert!(r.note.starts_with("the most recently updated session, 5f0c2a9e-"), "{}", r.note);
    let r = measure(&db, None, Some("ses_unarchived"));
    assert_eq!(r.source, UsageSource::Latest);
    assert!(
        r.note.starts_with("Your session ses_unarchived is not in the history archive yet; the most"),
        "{}",
        r.note
    );
    // A named session that does not exist is an error; an empty archive an answer.
    let req = ContextUsageRequest { session_id: Some("ses_nope".into()), ..Default::default() };
    let err = context_usage(&db, &req, &PluginConfig::default().context_meter).unwrap_err();
    assert_eq!(err.code, ErrorCode::HistorySessionNotFound);
    let empty = HistoryDb::open_in_memory().unwrap();
    let r = measure(&empty, None, None);
    assert_eq!(r.session_id, None);
    assert!(r.note.contains("holds no session yet"), "{}", r.note);
}

#[test]
fn context_use_turn_by_turn_keeps_each_turns_last_answer_and_marks_compactions() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let id = "ses_turns";
    let tokens = |total: u64| json!({"total": total, "input": 1, "output": 1, "cache": {"read": 0, "write": 0}});
    let user = |mid: &str, seq: i64| {
        HistoryMessage::new(id, mid, HistoryRole::User, seq, &format!("2026-03-01T10:01:{seq:02}.000Z"))
    };
    let batch = IngestBatch {
        sessions: vec![session(id, HistoryHost::OpenCode, None, "2026-03-01T10:02:00.000Z")],
        messages: vec![
            user("u1", 1),
            answer(id, "a1", 2, tokens(90_000), "claude-sonnet-4"),
            answer(id, "a1b", 3, tokens(100_000), "claude-sonnet-4"),
            user("u2", 4),
            answer(id, "a2", 5, tokens(150_000), "claude-sonnet-4"),
            HistoryMessage { compaction: true, ..user("c1", 6) },
            HistoryMessage { summary: true, ..answer(id, "s1", 7, tokens(0), "claude-sonnet-4") },
            user("u3", 8),
            answer(id, "a3", 9, tokens(20_000), "claude-sonnet-4"),
        ],
        ..IngestBatch::default()
    };
    let source = SourceRef { key: "test".into(), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor::default()).unwrap();

    let usage = context_usage_turns(&db, id, &PluginConfig::default().context_meter).unwrap();
    let used: Vec<u64> = usage.turns.iter().map(|t| t.used).collect();
    assert_eq!(used, [100_000, 150_000, 20_000], "each turn's last measured answer: {usage:?}");
    assert!(usage.turns.windows(2).all(|w| w[0].turn_number < w[1].turn_number));
    assert_eq!(usage.limit, 200_000);
    assert_eq!(usage.compacted_turns.len(), 1, "{usage:?}");
    let compacted = usage.compacted_turns[0];
    assert!(compacted >= usage.turns[1].turn_number && compacted <= usage.turns[2].turn_number, "{usage:?}");

    let err = context_usage_turns(&db, "ses_unknown", &PluginConfig::default().context_meter).unwrap_err();
    assert_eq!(err.code, ErrorCode::HistorySessionNotFound);
}
