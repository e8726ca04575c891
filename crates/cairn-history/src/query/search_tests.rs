//! The trigram path of `history_search` (a page of rows read in two statements) against the
//! row-at-a-time hydration it replaced, candidate for candidate, and against the scan
//! (`literal`), hit for hit, on archives of thousands of parts whose sessions interleave.

use super::*;
use crate::model::{Cursor, PartKind};
use crate::model::{HistoryHost, HistoryMessage, HistoryPart, HistoryRole, HistorySession, IngestBatch, ToolStatus};
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
            Some(&last) if rowids.len() as i64 == TRIGRAM_PAGE && candidates.len() < LITERAL_CANDIDATES => {
                below = last;
            }
            _ => break,
        }
    }
    Ok(first_in_scan_order(candidates))
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
    let views = search_scope(db.conn(), req).unwrap();
    let paged = trigram_candidates(db.conn(), db.fts(), &views, &kinds, &req.query).unwrap();
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
    assert!(many > TRIGRAM_PAGE, "more than a page matches: {many}");
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
    assert!(many > TRIGRAM_PAGE, "more than a page matches: {many}");
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
