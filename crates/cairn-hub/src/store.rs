//! Push, pull and the audit log: every SQL statement the sync routes run; `tokens`: the
//! tokens' and grants' statements.

pub(crate) mod tokens;

use deadpool_postgres::Pool;
use tokio_postgres::IsolationLevel;

use self::tokens::TS_SQL;
use crate::error::HubError;
use crate::tokens::Caller;
use cairn_wire::sync::{PullResponse, PulledMutation, PushEntry};

/// The transaction-scoped advisory lock every push holds while it takes seqs and commits.
///
/// A BIGSERIAL hands out numbers when rows are inserted, not when they commit: with two
/// pushers, seq 11 can commit before seq 10, and a puller that read 11 and moved its cursor
/// past it would never see 10. Under this lock pushes take their seqs and commit one at a time,
/// and PostgreSQL releases the lock only after the commit is visible, so seqs become visible
/// strictly in order. The lock is held for one batch of at most 100 inserts.
const PUSH_LOCK_KEY: i64 = 0x6361_6972_6e5f_7073; // "cairn_ps"

/// Insert a validated batch and return one seq per entry, in entry order, after COMMIT.
/// An entry whose `(project, mutation_id)` is already stored gets that row's seq back.
/// `received` counts the push's entries, those refused before the write too (the audit row's).
pub async fn push(
    pool: &Pool,
    caller: &Caller,
    created_by: &str,
    entries: &[PushEntry],
    received: usize,
) -> Result<Vec<i64>, HubError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PUSH_LOCK_KEY]).await?;
    let insert = tx
        .prepare_cached(
            "INSERT INTO hub_mutations (project, entity, entity_key, op, payload, created_by, token_id, mutation_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (project, mutation_id) WHERE mutation_id IS NOT NULL DO NOTHING RETURNING seq",
        )
        .await?;
    let existing = tx.prepare_cached("SELECT seq FROM hub_mutations WHERE project = $1 AND mutation_id = $2").await?;
    // Every insert is sent at once and the answers read after (the driver pipelines queries
    // issued together on one connection): the lock is held for about one round trip, not one
    // per entry. They are sent in entry order (the
    // futures are first polled in order) and PostgreSQL runs them in that order, so seqs follow it.
    let (pipe, insert, created_by) = (&tx, &insert, &created_by);
    let inserts = entries.iter().map(|e| async move {
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
            [&e.project, &e.entity, &e.entity_key, &e.op, &e.payload, created_by, &caller.token_id, &e.mutation_id];
        pipe.query_opt(insert, &params).await
    });
    let inserted = futures_util::future::try_join_all(inserts).await?;
    // Duplicates (the conflict can only come from a mutation_id, so the row is there) get the
    // seq stored first, in one more pipelined round.
    let existing = &existing;
    let lookups = entries.iter().zip(&inserted).map(|(e, row)| async move {
        match row {
            Some(row) => Ok::<i64, tokio_postgres::Error>(row.get(0)),
            None => Ok(pipe.query_one(existing, &[&e.project, &e.mutation_id]).await?.get(0)),
        }
    });
    let seqs = futures_util::future::try_join_all(lookups).await?;
    let project = entries.first().map(|e| e.project.as_str());
    tx.execute(
        "INSERT INTO hub_audit_log (token_id, action, project, outcome, http_status, entry_count, accepted_count) \
         VALUES ($1, 'push', $2, 'ok', 200, $3, $4)",
        &[&caller.token_id, &project, &count(received), &count(seqs.len())],
    )
    .await?;
    tx.commit().await?;
    Ok(seqs)
}

/// Mutations after `since_seq` in the projects `projects`, oldest first, at most `limit`.
/// Rows and `latest_seq` come from one snapshot, so `latest_seq` never runs ahead of a row
/// this page left out.
pub async fn pull(pool: &Pool, projects: &[String], since_seq: i64, limit: i64) -> Result<PullResponse, HubError> {
    let mut client = pool.get().await?;
    let tx = client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().await?;
    let page = tx
        .prepare_cached(&format!(
            "SELECT seq, project, entity, entity_key, op, payload, \
               to_char(occurred_at AT TIME ZONE 'UTC', {TS_SQL}), mutation_id \
             FROM hub_mutations WHERE seq > $1 AND project = ANY($2) ORDER BY seq LIMIT $3"
        ))
        .await?;
    let rows = tx.query(&page, &[&since_seq, &projects, &(limit + 1)]).await?;
    let latest = tx
        .prepare_cached(
            "SELECT COALESCE(max(last.seq), 0)::bigint FROM unnest($1::text[]) AS p(project), \
             LATERAL (SELECT max(seq) AS seq FROM hub_mutations m WHERE m.project = p.project) AS last",
        )
        .await?;
    let latest_seq: i64 = tx.query_one(&latest, &[&projects]).await?.get(0);
    tx.commit().await?;
    let has_more = rows.len() as i64 > limit;
    let mutations = rows
        .iter()
        .take(usize::try_from(limit).unwrap_or(0))
        .map(|row| PulledMutation {
            seq: row.get(0),
            project: row.get(1),
            entity: row.get(2),
            entity_key: row.get(3),
            op: row.get(4),
            payload: row.get(5),
            occurred_at: row.get(6),
            mutation_id: row.get(7),
        })
        .collect();
    Ok(PullResponse { mutations, has_more, latest_seq, project: String::new() })
}

/// One row of the audit log: who did what to which project, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct AuditRow<'a> {
    pub token_id: Option<i64>,
    pub action: &'a str,
    pub project: Option<&'a str>,
    /// `ok` or the error code of the refusal.
    pub outcome: &'a str,
    pub http_status: u16,
    pub entries: usize,
    pub accepted: usize,
}

/// Record a pull or a refusal. Best effort: a refusal is answered even when the database that
/// would record it is down.
pub async fn audit(pool: &Pool, row: AuditRow<'_>) {
    if let Err(e) = write_audit(pool, row).await {
        tracing::warn!(error = %e, "audit row not written");
    }
}

/// A pull or a refusal acknowledges no data, so its audit row is committed without waiting for
/// the disk flush (`synchronous_commit = off`): a crash may lose the last few such rows, never
/// a mutation, and a pull does not wait on an fsync for its bookkeeping.
async fn write_audit(pool: &Pool, row: AuditRow<'_>) -> Result<(), HubError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.batch_execute("SET LOCAL synchronous_commit = off").await?;
    tx.execute(
        "INSERT INTO hub_audit_log (token_id, action, project, outcome, http_status, entry_count, accepted_count) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &row.token_id,
            &row.action,
            &row.project,
            &row.outcome,
            &i32::from(row.http_status),
            &count(row.entries),
            &count(row.accepted),
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Whether PostgreSQL answers a trivial query (the health route).
pub async fn ping(pool: &Pool) -> Result<(), HubError> {
    let client = pool.get().await?;
    client.execute("SELECT 1", &[]).await?;
    Ok(())
}
