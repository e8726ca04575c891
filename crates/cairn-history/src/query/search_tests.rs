//! The trigram path of `history_search` (a page of rows read in two statements) against the
//! row-at-a-time hydration it replaced, candidate for candidate, and against the scan
//! (`literal`), hit for hit, on archives of thousands of parts whose sessions interleave.

use super::*;
use crate::model::{Cursor, PartKind};
use crate::model::{HistoryHost, HistoryMessage, HistoryPart, HistoryRole, HistorySession, IngestBatch, ToolStatus};
use crate::query::scope::{SCOPE_OF_ALL, SCOPE_OF_PROJECT};
use crate::store::SourceRef;
use crate::tests::search_request;
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// The trigram path as it was: every row of a page hydrated by a statement of its own. The new
/// path must answer exactly what this answers.
fn one_by_one(
    conn: &Connection,
    fts: &Connection,
    views: &[View],
    kinds: &[&str],
    text: &str,
) -> Result<Vec<Candidate>> {
    let by_session = in_scope_order(views);
    let Some((oldest, mut below)) = trigram_span(conn, views)? else { return Ok(Vec::new()) };
    let phrase = trigram_phrase(text);
    let mut candidates = Vec::new();
    loop {
        let rowids = trigram_page(fts, &phrase, oldest, below)?;
        for &rowid in &rowids {
            let Some((session_id, message, part)) = hydrate(conn, rowid)? else { continue };
            let Some(&(order, view)) = by_session.get(session_id.as_str()) else { continue };
            let kind_ok = indexed_kind(part.kind).is_some_and(|k| kinds.contains(&k));
            if kind_ok && view.shows(&message) {
                candidates.push((order, Candidate { session_id, message, part, rank: 0.0 }));
            }
        }
        match rowids.last() {
            Some(&last) if rowids.len() == TRIGRAM_PAGE && candidates.len() < LITERAL_CANDIDATES => {
                below = last;
            }
            _ => break,
        }
    }
    Ok(first_in_scan_order(candidates))
}

/// One page of the trigram index's matches for `phrase`, newest rowids first, below `below`
/// and from `oldest` on.
fn trigram_page(fts: &Connection, phrase: &str, oldest: i64, below: i64) -> Result<Vec<i64>> {
    let mut lookup = fts.prepare_cached(
        "SELECT rowid FROM history_cjk WHERE history_cjk MATCH ?1 AND rowid >= ?2 AND rowid < ?3
         ORDER BY rowid DESC LIMIT ?4",
    )?;
    let rowids = lookup.query_map(params![phrase, oldest, below, TRIGRAM_PAGE as i64], |r| r.get(0))?;
    Ok(rowids.collect::<rusqlite::Result<_>>()?)
}

/// What a candidate is, everything grouping reads of it.
type Key = (String, String, i64, i64, String, PartKind, Option<String>, bool, bool, String);

fn keys(candidates: &[Candidate]) -> Vec<Key> {
    candidates
        .iter()
        .map(|c| {
            (
                c.session_id.clone(),
                c.message.id.clone(),
                c.message.seq,
                c.part.rowid,
                c.part.id.clone(),
                c.part.kind,
                c.part.tool.clone(),
                c.message.summary,
                c.message.compaction,
                format!("{}|{}|{}|{}", c.message.role, c.message.turn, c.message.synthetic, c.message.created_at),
            )
        })
        .collect()
}

/// proptest's ChaCha generator from a fixed seed: the same archive at every run.
fn seeded(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

const WORDS: &[&str] =
    &["数据库", "连接", "错误", "迁移", "脚本", "接続", "エラー", "テスト", "API", "设计", "cache", " "];

fn ts(n: usize) -> String {
    format!("2026-03-{:02}T{:02}:{:02}:{:02}.000Z", 1 + n / 86_400 % 28, n / 3600 % 24, n / 60 % 60, n % 60)
}

/// `sessions` sessions of `messages` messages each (1-3 parts: text, sometimes reasoning and a
/// tool call, some parts without any CJK). `interleaved`: the messages arrive in batches mixing
/// every session, out of their order within it, and the sessions' update times are in no
/// relation to their rowids; else one
/// session after another, each updated after the one before (rowid order is the scope's order
/// reversed). Every 4th session has a compaction halfway.
fn archive(seed: u64, sessions: usize, messages: usize, interleaved: bool) -> HistoryDb {
    let mut rng = seeded(seed);
    let mut db = HistoryDb::open_in_memory().unwrap();
    let ids: Vec<String> = (0..sessions).map(|s| format!("ses_{s:02}")).collect();
    let updated: Vec<usize> = (0..sessions)
        .map(|s| if interleaved { 1000 + rng.random_range(0..100_000) } else { 1000 + s * 1000 })
        .collect();
    let mut order: Vec<(usize, usize)> = (0..sessions).flat_map(|s| (0..messages).map(move |m| (s, m))).collect();
    if interleaved {
        // Messages in order within a session, sessions mixed: a random merge.
        let mut next = vec![0; sessions];
        order.clear();
        while order.len() < sessions * messages {
            let s = rng.random_range(0..sessions);
            if next[s] < messages {
                order.push((s, next[s]));
                next[s] += 1;
            }
        }
    }
    let phrase = |rng: &mut TestRng| -> String {
        (0..2 + rng.random_range(0..7)).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect()
    };
    for (n, chunk) in order.chunks(97).enumerate() {
        let mut batch = IngestBatch {
            sessions: (0..sessions)
                .map(|s| HistorySession {
                    project: Some("shop".into()),
                    ..HistorySession::new(&ids[s], HistoryHost::OpenCode, &ts(0), &ts(updated[s]))
                })
                .collect(),
            ..Default::default()
        };
        for &(s, m) in chunk {
            let role = if m % 2 == 0 { HistoryRole::User } else { HistoryRole::Assistant };
            let id = format!("msg_{s:02}_{m:04}");
            // Interleaved, messages also arrive out of their order (a backfill): rowid order
            // is not the newest-message-first order within a session.
            let seq = if interleaved { (m * 7919 % messages) as i64 } else { m as i64 };
            let mut message = HistoryMessage::new(&ids[s], &id, role, seq, &ts(m));
            message.compaction = s % 4 == 0 && m == messages / 2;
            let part = |idx: i64, kind: PartKind| HistoryPart::new(&ids[s], &id, &format!("{id}:{idx}"), idx, kind);
            let body = if rng.random_range(0..10) == 0 { "plain english only".to_owned() } else { phrase(&mut rng) };
            batch.parts.push(HistoryPart { text: Some(body), ..part(0, PartKind::Text) });
            if rng.random_range(0..4) == 0 {
                batch.parts.push(HistoryPart { text: Some(phrase(&mut rng)), ..part(1, PartKind::Reasoning) });
            }
            if rng.random_range(0..5) == 0 {
                batch.parts.push(HistoryPart {
                    tool: Some("bash".into()),
                    call_id: Some(format!("call-{id}")),
                    status: Some(ToolStatus::Completed),
                    input: Some(format!("{{\"command\":\"grep {}\"}}", phrase(&mut rng))),
                    output: Some(phrase(&mut rng)),
                    ..part(2, PartKind::Tool)
                });
            }
            batch.messages.push(message);
        }
        let source = SourceRef { key: format!("batch-{n}"), host: HistoryHost::OpenCode };
        let cursor = Cursor { offset: 1, size: 1, mtime_ms: 1, watermark: None };
        db.apply(&source, None, &batch, &cursor).unwrap();
    }
    db
}

/// The two paths over the same scope, candidate for candidate; answers how many there were.
fn same_as_one_by_one(db: &HistoryDb, req: &SearchRequest) -> usize {
    let kinds = parse_kinds(req.kinds.as_deref()).unwrap();
    let views = search_scope(db.conn(), req, SCOPE_SESSIONS).unwrap();
    let paged = trigram_candidates(db.conn(), db.fts(), &views, &kinds, &req.query, None).unwrap();
    let reference = one_by_one(db.conn(), db.fts(), &views, &kinds, &req.query).unwrap();
    assert_eq!(
        keys(&paged),
        keys(&reference),
        "{:?} in {:?} ({:?}, caller {:?})",
        req.query,
        req.session_id,
        req.kinds,
        req.caller_session_id
    );
    paged.len()
}

/// Sessions that interleave and whose update order has nothing to do with their rowids, so the
/// page boundaries, the scope's order and the 300-candidate cut all matter: the paged path keeps
/// every candidate the row-at-a-time one found, in its order, through several pages, the type
/// filter, one session's span and the caller's own compacted session.
#[test]
fn the_paged_trigram_path_finds_what_the_row_at_a_time_one_found() {
    let db = archive(11, 12, 500, true);
    let parts: i64 = db.fts().query_row("SELECT count(*) FROM history_cjk", [], |r| r.get(0)).unwrap();
    assert!(parts > 5_000, "{parts}");
    let many: i64 = db
        .fts()
        .query_row("SELECT count(*) FROM history_cjk WHERE history_cjk MATCH '\"数据库\"'", [], |r| r.get(0))
        .unwrap();
    assert!(many > TRIGRAM_PAGE as i64, "more than a page matches: {many}");
    let queries = [
        "数据库",
        "数据库连接",
        "エラーテスト",
        "API设计",
        "api设计",
        "据库连",
        "迁移 脚本",
        "设计cache",
        "数据库连接错误迁移脚本",
    ];
    let (mut full, mut paged_more) = (0, 0);
    for query in queries {
        for kinds in [None, Some("reasoning"), Some("tool"), Some("text|tool|reasoning")] {
            let n = same_as_one_by_one(&db, &search_request(query, None, false, kinds, None));
            full += usize::from(n == LITERAL_CANDIDATES);
            // the compacted session of its own caller, and another caller's view of it
            same_as_one_by_one(&db, &search_request(query, None, false, kinds, Some("ses_04")));
            for session in ["ses_00", "ses_05", "ses_11"] {
                let n = same_as_one_by_one(&db, &search_request(query, Some(session), false, kinds, None));
                paged_more += usize::from(n > 0);
                same_as_one_by_one(&db, &search_request(query, Some(session), false, kinds, Some(session)));
            }
        }
    }
    assert!(full >= 3, "the 300-candidate cut was reached {full} times");
    assert!(paged_more > 20, "{paged_more}");
    // hostile: nothing matches, a query longer than any part, a quote, FTS5 syntax
    let long = "数据库连接".repeat(40);
    for query in [long.as_str(), "数据\"库", "数据库*", "NEAR(数据库 连接)", "数据库 OR 连接", "ーーー"]
    {
        assert_eq!(same_as_one_by_one(&db, &search_request(query, None, false, None, None)), 0, "{query:?}");
    }
}

/// What an agent gets: the trigram path's hits are the scan's (`literal`), message for message and
/// hit for hit, on an archive of more matches than a page holds, where the sessions were written
/// in the order they were updated; with the hostile queries (one character, two, mixed scripts,
/// longer than any part, a quote) that a scan answers too.
#[test]
fn the_trigram_path_answers_what_the_scan_answers() {
    let db = archive(5, 24, 200, false);
    let many: i64 = db
        .fts()
        .query_row("SELECT count(*) FROM history_cjk WHERE history_cjk MATCH '\"数据库\"'", [], |r| r.get(0))
        .unwrap();
    assert!(many > TRIGRAM_PAGE as i64, "more than a page matches: {many}");
    let long = "数据库连接".repeat(40);
    let queries = [
        "数",
        "数据",
        "数据库",
        "数据库连接",
        "エラーテスト",
        "API设计",
        "api设计",
        "设计cache",
        "迁移 脚本",
        "连接错误迁移脚本",
        long.as_str(),
        "数据\"库",
        "接続エ",
    ];
    let cfg = HistorySettings::default();
    let mut found = 0;
    for query in queries {
        for (session, caller) in
            [(None, None), (Some("ses_07"), None), (None, Some("ses_19")), (Some("ses_04"), Some("ses_04"))]
        {
            for kinds in [None, Some("text|tool|reasoning")] {
                let indexed = search(&db, &search_request(query, session, false, kinds, caller), &cfg).unwrap();
                let scanned = search(&db, &search_request(query, session, true, kinds, caller), &cfg).unwrap();
                let hits = |r: &SearchResults| -> Vec<(String, String, Vec<String>, Option<u64>)> {
                    r.messages
                        .iter()
                        .map(|m| {
                            let parts = m.hits.iter().map(|h| h.part_id.clone()).collect();
                            (m.session_id.clone(), m.message_id.clone(), parts, m.remain_hits)
                        })
                        .collect()
                };
                assert_eq!(hits(&indexed), hits(&scanned), "{query:?} in {session:?}, caller {caller:?}, {kinds:?}");
                found += usize::from(!indexed.messages.is_empty());
            }
        }
    }
    assert!(found > 30, "{found}");
}

/// Parts whose message is gone (a row the paged path reads without its message) never count,
/// as the row-at-a-time path never counted them: with one message in five deleted, many of
/// them among the newest matches, the cut is taken again without them, through several pages,
/// and the candidates are still the reference's, one for one.
#[test]
fn parts_whose_message_is_missing_leave_the_cut_and_it_is_taken_again() {
    let db = archive(23, 12, 500, true);
    let deleted = db
        .conn()
        .execute("DELETE FROM history_messages WHERE rowid % 5 = 0 OR (seq > 400 AND seq % 3 = 0)", [])
        .unwrap();
    assert!(deleted > 1_000, "{deleted}");
    let newest_orphans: i64 = db
        .conn()
        .query_row(
            "SELECT count(*) FROM (SELECT * FROM history_parts ORDER BY rowid DESC LIMIT 2000) p
             WHERE NOT EXISTS (SELECT 1 FROM history_messages m WHERE m.session_id = p.session_id AND m.id = p.message_id)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(newest_orphans > 300, "orphans among the newest parts: {newest_orphans}");
    let mut full = 0;
    for query in ["数据库", "数据库连接", "エラーテスト", "API设计", "迁移 脚本", "数据库连接错误迁移脚本"]
    {
        for kinds in [None, Some("reasoning"), Some("text|tool|reasoning")] {
            let n = same_as_one_by_one(&db, &search_request(query, None, false, kinds, None));
            full += usize::from(n == LITERAL_CANDIDATES);
            same_as_one_by_one(&db, &search_request(query, None, false, kinds, Some("ses_08")));
            same_as_one_by_one(&db, &search_request(query, Some("ses_03"), false, kinds, None));
        }
    }
    assert!(full >= 3, "the 300-candidate cut was reached {full} times");
}

/// A search's scope (up to 5,000 session ids, newest first) is read from an index that holds
/// the id, never a table row per session: an archive migrated from the layout before has it too.
#[test]
fn a_search_scope_is_read_from_the_sessions_index_alone() {
    let db = archive(3, 2, 4, false);
    for (sql, values) in [(SCOPE_OF_ALL, vec!["5000"]), (SCOPE_OF_PROJECT, vec!["5000", "shop"])] {
        let plan: Vec<String> = db
            .conn()
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map(rusqlite::params_from_iter(values), |r| r.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(plan.iter().any(|step| step.contains("USING COVERING INDEX")), "{sql}: {plan:?}");
        assert!(!plan.iter().any(|step| step.contains("TEMP B-TREE")), "{sql}: {plan:?}");
    }
    let found = search(&db, &search_request("数据库", None, false, None, None), &HistorySettings::default());
    assert!(!found.unwrap().messages.is_empty());
}

/// `english` parts that all say "build" (and one in 500 "zeppelin"), then an import of
/// `imported` parts in Chinese, the newest rowids: the archive of a user who backfilled another
/// host's sessions last.
fn archive_then_import(english: usize, imported: usize) -> HistoryDb {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let mut apply = |session: &str, n: usize, body: &dyn Fn(usize) -> String| {
        let mut batch = IngestBatch {
            sessions: vec![HistorySession::new(session, HistoryHost::OpenCode, &ts(0), &ts(1))],
            ..Default::default()
        };
        for m in 0..n {
            let id = format!("msg_{m:05}");
            batch.messages.push(HistoryMessage::new(session, &id, HistoryRole::User, m as i64, &ts(m)));
            let part = HistoryPart::new(session, &id, &format!("{id}:0"), 0, PartKind::Text);
            batch.parts.push(HistoryPart { text: Some(body(m)), ..part });
        }
        let source = SourceRef { key: session.to_owned(), host: HistoryHost::OpenCode };
        let cursor = Cursor { offset: 1, size: 1, mtime_ms: 1, watermark: None };
        db.apply(&source, None, &batch, &cursor).unwrap();
    };
    apply("ses_english", english, &|m| {
        let rare = if m % 500 == 0 { " zeppelin" } else { "" };
        format!("the build failed in step {m}{rare}")
    });
    apply("ses_import", imported, &|m| format!("数据库连接错误 {m}"));
    db
}

/// A word in every English part ("build") is common however the newest parts read: the sample
/// spans the archive. Counted in the newest parts alone (an import in another language), every English
/// word looked rare and was ranked over the whole archive (at 10M parts: seconds a search).
#[test]
fn a_word_in_most_parts_is_common_when_the_newest_parts_are_an_import() {
    let db = archive_then_import(12_000, 4_000);
    let (first, last): (i64, i64) = db
        .conn()
        .query_row("SELECT min(rowid), max(rowid) FROM history_parts", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    let in_newest: i64 = db
        .fts()
        .query_row(
            "SELECT count(*) FROM history_fts WHERE history_fts MATCH '{body} : \"build\"' AND rowid > ?1",
            [last - SAMPLE_WINDOW],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(in_newest, 0, "the newest parts are the import's");
    let split = split_common(db.fts(), query::parse("build zeppelin 数据库连接"), first, last).unwrap();
    let words = |terms: &[Term]| -> Vec<String> { needles_of(terms) };
    assert_eq!(words(&split.common), vec!["build"]);
    assert_eq!(words(&split.rare), vec!["zeppelin", "数据库连接"]);
    assert!(split.rare_rows < COMMON_ROWS, "{}", split.rare_rows);
    // The search still answers: the newest English parts for "build", the rare word ranked.
    let cfg = HistorySettings::default();
    let found = search(&db, &search_request("build", None, false, None, None), &cfg).unwrap();
    assert_eq!(found.messages.len(), cfg.search.message_limit);
    assert!(found.messages.iter().all(|m| m.session_id == "ses_english"));
    let found = search(&db, &search_request("zeppelin", None, false, None, None), &cfg).unwrap();
    assert_eq!(found.messages.len(), cfg.search.message_limit.min(12_000 / 500));
}

/// A window that found nothing is no sign of rare words when the sample says otherwise: the
/// next window is 8× as wide, not the whole archive at once.
#[test]
fn the_window_widens_by_eight_unless_few_matches_are_expected() {
    let span = 10_000_000;
    assert_eq!(next_window(0, FIRST_WINDOW, span, 3_000_000), FIRST_WINDOW * 8);
    assert_eq!(next_window(0, FIRST_WINDOW, span, 0), i64::MAX, "nothing sampled, nothing found: rare");
    assert_eq!(next_window(0, FIRST_WINDOW, span, FULL_RANK_ROWS), i64::MAX);
    assert_eq!(next_window(30, FIRST_WINDOW, span, 0), FIRST_WINDOW * 8, "30 in 20k: ~15k in 10M");
    assert_eq!(next_window(10, FIRST_WINDOW, 100_000, 40), i64::MAX);
}

/// `sessions` sessions of three messages, each newer than the one before; only the oldest
/// holds "zeppelin", every one "migration".
fn sessions_one_old_word(sessions: usize) -> HistoryDb {
    let mut db = HistoryDb::open_in_memory().unwrap();
    for s in 0..sessions {
        let id = format!("ses_{s:02}");
        let session = HistorySession {
            project: Some("shop".into()),
            ..HistorySession::new(&id, HistoryHost::OpenCode, &ts(0), &ts(1000 + s * 1000))
        };
        let mut batch = IngestBatch { sessions: vec![session], ..Default::default() };
        for m in 0..3 {
            let message = format!("msg_{s:02}_{m}");
            batch.messages.push(HistoryMessage::new(&id, &message, HistoryRole::User, m as i64, &ts(m)));
            let text = if s == 0 && m == 1 { "the zeppelin migration failed" } else { "the build migration passed" };
            let part = HistoryPart::new(&id, &message, &format!("{message}:0"), 0, PartKind::Text);
            batch.parts.push(HistoryPart { text: Some(text.into()), ..part });
        }
        let source = SourceRef { key: format!("session-{s}"), host: HistoryHost::OpenCode };
        db.apply(&source, None, &batch, &Cursor { offset: 1, size: 1, mtime_ms: 1, watermark: None }).unwrap();
    }
    db
}

/// The soak's finding: with more sessions than a search looks in first, a word only an older
/// session holds was not found at all. Now the older sessions are searched when the newest
/// hold too few matches, after them; with enough in the newest, nothing older is shown.
#[test]
fn a_session_older_than_the_newest_searched_is_still_found() {
    let db = sessions_one_old_word(8);
    let cfg = HistorySettings::default();
    let sessions_of =
        |found: &SearchResults| -> Vec<String> { found.messages.iter().map(|m| m.session_id.clone()).collect() };
    for project in [None, Some("shop")] {
        let req =
            SearchRequest { project: project.map(Into::into), ..search_request("zeppelin", None, false, None, None) };
        let found = search_in_pages_of(&db, &req, &cfg, 3).unwrap();
        assert_eq!(sessions_of(&found), ["ses_00"], "project {project:?}");
        assert_eq!(found.messages[0].message_id, "msg_00_1");
        let found = search(&db, &req, &cfg).unwrap();
        assert_eq!(sessions_of(&found), ["ses_00"], "project {project:?}, the shipped scope");
    }
    // Two newest sessions hold 6 matches, more than a page (5): no older session is shown.
    let req = search_request("migration", None, false, None, None);
    let found = search_in_pages_of(&db, &req, &cfg, 2).unwrap();
    assert_eq!(found.messages.len(), cfg.search.message_limit);
    assert!(sessions_of(&found).iter().all(|s| s == "ses_07" || s == "ses_06"), "{:?}", sessions_of(&found));
    // The newest one holds 3: the page is filled from the older sessions, after its own.
    let found = search_in_pages_of(&db, &req, &cfg, 1).unwrap();
    let sessions = sessions_of(&found);
    assert_eq!(sessions.len(), cfg.search.message_limit);
    assert!(sessions[..3].iter().all(|s| s == "ses_07") && sessions[3..].iter().all(|s| s != "ses_07"), "{sessions:?}");
    // One session asked for: that session only, however many there are.
    let req = search_request("zeppelin", Some("ses_00"), false, None, None);
    assert_eq!(sessions_of(&search_in_pages_of(&db, &req, &cfg, 1).unwrap()), ["ses_00"]);
}

/// One session of `project` updated at `updated` (seconds), a message for each text.
fn add_session(db: &mut HistoryDb, id: &str, project: &str, updated: usize, texts: &[&str]) {
    let session = HistorySession {
        project: Some(project.into()),
        ..HistorySession::new(id, HistoryHost::OpenCode, &ts(0), &ts(updated))
    };
    let mut batch = IngestBatch { sessions: vec![session], ..Default::default() };
    for (m, text) in texts.iter().enumerate() {
        let message = format!("{id}_msg_{m}");
        batch.messages.push(HistoryMessage::new(id, &message, HistoryRole::User, m as i64, &ts(m)));
        let part = HistoryPart::new(id, &message, &format!("{message}:0"), 0, PartKind::Text);
        batch.parts.push(HistoryPart { text: Some((*text).into()), ..part });
    }
    let source = SourceRef { key: id.to_owned(), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor { offset: 1, size: 1, mtime_ms: 1, watermark: None }).unwrap();
}

/// Past the newest for a substring in Chinese too (the trigram walk gathers the older sessions'
/// matches on its way), and only the project's: another project's older session holding the
/// words is left out of a search of the project, and shown in a search of all.
#[test]
fn an_older_session_is_found_by_a_chinese_substring_within_its_project() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    add_session(&mut db, "other_00", "other", 500, &["数据库迁移失败了"]);
    for s in 0..6 {
        let first = if s == 0 { "数据库迁移失败了，缓存失效" } else { "构建通过了，缓存失效" };
        add_session(&mut db, &format!("ses_{s:02}"), "shop", 1000 + s * 1000, &[first, "缓存失效了", "又是缓存失效"]);
    }
    let cfg = HistorySettings::default();
    let sessions_of = |found: &SearchResults| -> Vec<String> {
        let mut sessions: Vec<String> = found.messages.iter().map(|m| m.session_id.clone()).collect();
        sessions.dedup();
        sessions
    };
    let shop =
        |query: &str| SearchRequest { project: Some("shop".into()), ..search_request(query, None, false, None, None) };
    assert_eq!(sessions_of(&search_in_pages_of(&db, &shop("数据库迁移"), &cfg, 2).unwrap()), ["ses_00"]);
    let all = search_in_pages_of(&db, &search_request("数据库迁移", None, false, None, None), &cfg, 2).unwrap();
    assert_eq!(sessions_of(&all), ["ses_00", "other_00"], "newest match first");
    assert_eq!(all.messages[0].message_id, "ses_00_msg_0");
    // Two newest sessions hold six messages with the words, more than a page: nothing older.
    let found = search_in_pages_of(&db, &shop("缓存失效"), &cfg, 2).unwrap();
    assert_eq!(
        found.messages.len(),
        cfg.search.message_limit,
        "{:?}",
        found.messages.iter().map(|m| (&m.session_id, &m.message_id)).collect::<Vec<_>>()
    );
    assert!(sessions_of(&found).iter().all(|s| s == "ses_05" || s == "ses_04"), "{:?}", sessions_of(&found));
    // The newest holds three: the page is filled from the older sessions, after its own.
    let found = search_in_pages_of(&db, &shop("缓存失效"), &cfg, 1).unwrap();
    let sessions: Vec<&str> = found.messages.iter().map(|m| m.session_id.as_str()).collect();
    assert_eq!(sessions.len(), cfg.search.message_limit);
    assert!(
        sessions[..3].iter().all(|s| *s == "ses_05") && sessions[3..].iter().all(|s| *s == "ses_04"),
        "{sessions:?}"
    );
}

/// The caller's own session past the newest still hides what came after its latest compaction
/// (the agent has that in its context), on both paths: a Chinese substring (the trigram walk)
/// and an English word (the ranked second pass).
#[test]
fn the_callers_own_session_past_the_newest_shows_only_what_came_before_its_compaction() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let own = "own_00";
    let session = HistorySession {
        project: Some("shop".into()),
        ..HistorySession::new(own, HistoryHost::OpenCode, &ts(0), &ts(500))
    };
    let mut batch = IngestBatch { sessions: vec![session], ..Default::default() };
    for (m, text) in
        ["zeppelin 数据库迁移 before", "zeppelin 数据库迁移 summary", "zeppelin 数据库迁移 after"].iter().enumerate()
    {
        let id = format!("{own}_msg_{m}");
        let message = HistoryMessage::new(own, &id, HistoryRole::User, m as i64, &ts(m));
        batch.messages.push(HistoryMessage { compaction: m == 1, ..message });
        let part = HistoryPart::new(own, &id, &format!("{id}:0"), 0, PartKind::Text);
        batch.parts.push(HistoryPart { text: Some((*text).into()), ..part });
    }
    let source = SourceRef { key: own.to_owned(), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor { offset: 1, size: 1, mtime_ms: 1, watermark: None }).unwrap();
    add_session(&mut db, "ses_01", "shop", 1000, &["构建通过了", "the build passed"]);
    let cfg = HistorySettings::default();
    for query in ["数据库迁移", "zeppelin"] {
        let messages = |caller: Option<&str>| -> Vec<String> {
            let req =
                SearchRequest { project: Some("shop".into()), ..search_request(query, None, false, None, caller) };
            let found = search_in_pages_of(&db, &req, &cfg, 1).unwrap();
            found.messages.iter().map(|m| m.message_id.clone()).collect()
        };
        assert_eq!(messages(Some(own)), ["own_00_msg_0"], "{query}: the caller's own, before its compaction");
        assert!(messages(None).contains(&"own_00_msg_2".to_owned()), "{query}: another caller sees it all");
    }
}
