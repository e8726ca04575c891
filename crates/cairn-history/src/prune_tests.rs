use super::*;

fn day(n: i64) -> OffsetDateTime {
    time::macros::datetime!(2026-01-01 00:00 UTC) + time::Duration::days(n)
}

/// `count` sessions, session i last updated on day i, each with 2 messages of 3 parts.
fn archive(count: i64) -> HistoryDb {
    let db = HistoryDb::open_in_memory().unwrap();
    for i in 0..count {
        let (id, at) = (format!("ses_{i:03}"), format_ts(day(i)));
        db.conn()
            .execute(
                "INSERT INTO history_sessions (id, host, created_at, updated_at) VALUES (?1, 'opencode', ?2, ?2)",
                rusqlite::params![id, at],
            )
            .unwrap();
        for m in 0..2 {
            db.conn()
                .execute(
                    "INSERT INTO history_messages (session_id, id, role, seq, created_at) VALUES (?1, ?2, 'user', ?3, ?4)",
                    rusqlite::params![id, format!("m{m}"), m, at],
                )
                .unwrap();
            for p in 0..3 {
                db.conn()
                    .execute(
                        "INSERT INTO history_parts (session_id, message_id, id, idx, kind, text) VALUES (?1, ?2, ?3, ?4, 'text', ?5)",
                        rusqlite::params![id, format!("m{m}"), format!("m{m}p{p}"), p, "x".repeat(100)],
                    )
                    .unwrap();
            }
        }
    }
    db
}

fn sessions(db: &HistoryDb) -> i64 {
    db.conn().query_row("SELECT count(*) FROM history_sessions", [], |r| r.get(0)).unwrap()
}

fn orphans(db: &HistoryDb) -> i64 {
    db.conn()
        .query_row(
            "SELECT (SELECT count(*) FROM history_parts WHERE session_id NOT IN (SELECT id FROM history_sessions))
                  + (SELECT count(*) FROM history_messages WHERE session_id NOT IN (SELECT id FROM history_sessions))",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn sessions_older_than_the_cutoff_go_whole_and_a_dry_run_changes_nothing() {
    let mut db = archive(10);
    let request = PruneRequest { older_than_days: Some(3), dry_run: true, ..PruneRequest::default() };
    // Day 9 is "now": days 0..=5 are more than 3 days old.
    let dry = prune(&mut db, &request, day(9), &mut |_| true).unwrap();
    assert_eq!((dry.sessions, dry.messages, dry.parts, dry.bytes), (6, 12, 36, 3600), "{dry:?}");
    assert_eq!(sessions(&db), 10, "a dry run removes nothing");

    let done = prune(&mut db, &PruneRequest { dry_run: false, ..request }, day(9), &mut |_| true).unwrap();
    assert_eq!((done.sessions, done.parts, done.batches), (6, 36, 1));
    assert_eq!(sessions(&db), 4);
    assert_eq!(orphans(&db), 0);
    let forgotten: i64 = db.conn().query_row("SELECT count(*) FROM history_forgotten", [], |r| r.get(0)).unwrap();
    assert_eq!(forgotten, 6, "a later scan does not bring them back");
}

#[test]
fn a_size_cap_removes_the_oldest_sessions_first() {
    let mut db = archive(10);
    let live = archive_live_bytes(&db).unwrap();
    let request = PruneRequest { max_bytes: Some(live - 1), ..PruneRequest::default() };
    let done = prune(&mut db, &request, day(9), &mut |_| true).unwrap();
    assert!(done.sessions >= 1, "{done:?}");
    let oldest: String = db.conn().query_row("SELECT min(id) FROM history_sessions", [], |r| r.get(0)).unwrap();
    assert_eq!(oldest, format!("ses_{:03}", done.sessions), "the oldest went first");
}

#[test]
fn a_prune_stopped_between_batches_leaves_whole_sessions() {
    let mut db = archive(130);
    let request = PruneRequest { older_than_days: Some(1), ..PruneRequest::default() };
    // Stop after the first batch, as a killed daemon would between two transactions.
    let done = prune(&mut db, &request, day(200), &mut |_| false).unwrap();
    assert_eq!((done.sessions, done.batches), (PRUNE_BATCH as u64, 1));
    assert_eq!(sessions(&db), 130 - PRUNE_BATCH as i64);
    assert_eq!(orphans(&db), 0, "no half session");
    // Run again: the rest goes.
    let rest = prune(&mut db, &request, day(200), &mut |_| true).unwrap();
    assert_eq!((rest.sessions, rest.batches), (130 - PRUNE_BATCH as u64, 2));
    assert_eq!(sessions(&db), 0);
    db.fts().execute("INSERT INTO history_fts(history_fts) VALUES ('integrity-check')", []).unwrap();
}

#[test]
fn bad_day_counts_and_an_empty_request_are_refused_with_a_code() {
    let mut db = archive(1);
    for days in [0, MAX_KEEP_DAYS + 1] {
        let request = PruneRequest { older_than_days: Some(days), ..PruneRequest::default() };
        let err = prune(&mut db, &request, day(1), &mut |_| true).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument, "{days}");
    }
    let err = prune(&mut db, &PruneRequest::default(), day(1), &mut |_| true).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    assert_eq!(sessions(&db), 1);
}
