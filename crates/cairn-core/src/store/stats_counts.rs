//! The figures of `stats`, kept by the triggers of `0014_stats_counts.sql` as rows change, and
//! their full recount: `cairn doctor` compares the two and `--repair` rewrites the kept ones.
//! What cannot be kept as a count (a project's last activity, a max that deletes lower) is one
//! index seek per project.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::store::Store;

/// Every count of `stats_counts`, by (kind, key); rows at 0 left out, so a kept set and a
/// recount compare equal exactly when every figure agrees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsCounts(BTreeMap<(String, String), i64>);

impl StatsCounts {
    /// One count (0 when absent).
    pub fn get(&self, kind: &str, key: &str) -> i64 {
        self.0.get(&(kind.to_owned(), key.to_owned())).copied().unwrap_or(0)
    }

    /// The keys and counts of one kind (`type`, `project_memories`...), counts above 0.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = (&'a str, i64)> + 'a {
        self.0.iter().filter(move |((k, _), n)| k == kind && **n > 0).map(|((_, key), n)| (key.as_str(), *n))
    }

    /// The figures where `other` differs, as `kind/key: self vs other` (empty when equal).
    pub fn differences(&self, other: &StatsCounts) -> Vec<String> {
        let keys: std::collections::BTreeSet<_> = self.0.keys().chain(other.0.keys()).collect();
        keys.into_iter()
            .filter_map(|(kind, key)| {
                let (mine, theirs) = (self.get(kind, key), other.get(kind, key));
                (mine != theirs).then(|| format!("{kind}/{key}: {mine} kept, {theirs} counted"))
            })
            .collect()
    }
}

/// The recount, in the rows `stats_counts` keeps (the migration's backfill, the same SQL).
const RECOUNT: &str = "
    SELECT 'memories', '', count(*) FROM observations WHERE deleted_at IS NULL
    UNION ALL SELECT 'deleted', '', count(*) FROM observations WHERE deleted_at IS NOT NULL
    UNION ALL SELECT 'pinned', '', count(*) FROM observations WHERE deleted_at IS NULL AND pinned = 1
    UNION ALL SELECT 'type', type, count(*) FROM observations WHERE deleted_at IS NULL GROUP BY type
    UNION ALL SELECT 'project_memories', project, count(*) FROM observations WHERE deleted_at IS NULL GROUP BY project
    UNION ALL SELECT 'sessions', '', count(*) FROM sessions
    UNION ALL SELECT 'project_sessions', project, count(*) FROM sessions GROUP BY project
    UNION ALL SELECT 'prompts', '', count(*) FROM prompts
    UNION ALL SELECT 'project_prompts', project, count(*) FROM prompts GROUP BY project
    UNION ALL SELECT 'relations', '', count(*) FROM relations
    UNION ALL SELECT 'vectors', model, count(*) FROM embeddings GROUP BY model
    UNION ALL SELECT 'day', substr(created_at, 1, 10), count(*) FROM observations WHERE deleted_at IS NULL
        GROUP BY substr(created_at, 1, 10)
    UNION ALL SELECT 'project_day', project || char(31) || substr(created_at, 1, 10), count(*) FROM observations
        WHERE deleted_at IS NULL GROUP BY project, substr(created_at, 1, 10)";

/// The kinds `stats` shows (the per-day rows are the charts').
const STATS_KINDS: &str =
    "SELECT kind, key, n FROM stats_counts WHERE kind IN ('memories', 'deleted', 'pinned', 'type',
    'project_memories', 'sessions', 'project_sessions', 'prompts', 'project_prompts', 'relations', 'vectors')";

impl Store {
    /// Every count the triggers keep (the per-day ones too).
    pub fn kept_stats_counts(&self) -> Result<StatsCounts> {
        self.read_counts("SELECT kind, key, n FROM stats_counts")
    }

    /// The counts `stats` shows: a read of a few dozen rows (a seek per kind).
    pub fn kept_stats_figures(&self) -> Result<StatsCounts> {
        self.read_counts(STATS_KINDS)
    }

    /// Live memories per UTC day (`YYYY-MM-DD`) from `since` on, of one project or all: one
    /// range of the kept per-day counts.
    pub(crate) fn kept_memories_per_day(&self, project: Option<&str>, since: &str) -> Result<BTreeMap<String, i64>> {
        // A project's rows are `project 0x1F day`: its range ends before `project 0x20`.
        let (kind, prefix, end) = match project {
            Some(project) => ("project_day", format!("{project}\u{1f}"), format!("{project}\u{20}")),
            None => ("day", String::new(), "A".to_owned()),
        };
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT key, n FROM stats_counts WHERE kind = ?1 AND key >= ?2 AND key < ?3 AND n > 0")?;
        let rows = stmt.query_map(rusqlite::params![kind, format!("{prefix}{since}"), end], |r| {
            let key: String = r.get(0)?;
            Ok((key[prefix.len()..].to_owned(), r.get(1)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Stored vectors of `model`, as kept.
    pub fn kept_vector_count(&self, model: &str) -> Result<i64> {
        Ok(self.optional_i64("SELECT n FROM stats_counts WHERE kind = 'vectors' AND key = ?1", [model])?.unwrap_or(0))
    }

    /// Every count recounted from the rows (a scan of every table: 100s of ms at 100k).
    pub fn recounted_stats_counts(&self) -> Result<StatsCounts> {
        self.read_counts(RECOUNT)
    }

    /// Rewrite the kept counts from a recount (`cairn doctor --repair`).
    pub fn rewrite_stats_counts(&mut self) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM stats_counts", [])?;
            tx.execute(&format!("INSERT INTO stats_counts (kind, key, n) {RECOUNT}"), [])?;
            Ok(())
        })
    }

    fn read_counts(&self, sql: &str) -> Result<StatsCounts> {
        let mut stmt = self.conn().prepare_cached(sql)?;
        let mut rows = stmt.query([])?;
        let mut counts = BTreeMap::new();
        while let Some(row) = rows.next()? {
            let n: i64 = row.get(2)?;
            if n != 0 {
                counts.insert((row.get(0)?, row.get(1)?), n);
            }
        }
        Ok(StatsCounts(counts))
    }

    /// The newest of a project's live memories' `updated_at` and its sessions' `started_at`:
    /// two index seeks (`observations_project_updated`, `sessions_project`).
    pub(crate) fn project_last_activity(&self, project: &str) -> Result<Option<String>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT max(
                COALESCE((SELECT max(updated_at) FROM observations WHERE project = ?1 AND deleted_at IS NULL), ''),
                COALESCE((SELECT max(started_at) FROM sessions WHERE project = ?1), ''))",
        )?;
        let activity: String = stmt.query_row([project], |r| r.get(0))?;
        Ok((!activity.is_empty()).then_some(activity))
    }
}

#[cfg(test)]
#[path = "stats_counts_tests.rs"]
mod tests;
