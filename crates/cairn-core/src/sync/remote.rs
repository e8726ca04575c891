//! Sync with a hub (`cairn remote`, the daemon's autosync): one round pushes what the journal
//! holds for the hub and pulls what the hub has that this store has not applied.
//!
//! - **Push** reads each project's journal from the hub target's high-water mark, in batches
//!   that fit the hub's limits (100 entries, 8 MiB), each entry with an idempotency key
//!   `<node id>:<journal seq>`. The mark moves only when the hub answered a seq for every
//!   entry: the hub commits a batch whole or not at all, so a push with no answer is sent
//!   again and the hub hands back the seqs of its first commit.
//! - **Pull** reads pages after the cursor and applies each page in one transaction with the
//!   cursor's move, so a crash leaves either both or neither. This store's own mutations coming
//!   back are recognised by their key and skipped.
//! - A project the hub refuses (no grant, read-only) is reported and the others go on; a token
//!   the hub refuses, or a hub that does not answer, ends the round.
//!
//! The transport ([`HubTransport`]) and the store access ([`SyncAccess`]) are given by the
//! caller: the daemon's engine, or the CLI's own store when no daemon runs.

use std::sync::Mutex;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApplyReport, Mutation};
use crate::error::{CairnError, ErrorCode, Result};
use crate::settings::RemoteSettings;
use crate::store::Store;

/// Most entries in one push (the hub's limit, engram's).
pub const PUSH_MAX_ENTRIES: usize = 100;
/// Most bytes of entries in one push: under the hub's 8 MiB, with room for the envelope.
pub const PUSH_MAX_BYTES: usize = 7 * 1024 * 1024;
/// Mutations asked for per pull.
pub const PULL_PAGE: usize = 100;
/// The lease's name: one syncing process per data dir.
const LEASE: &str = "remote";
/// With every project syncing, a project the token has no grant for is asked about again
/// after this long (a grant may be added), not at every round.
const NOT_GRANTED_RETRY: std::time::Duration = std::time::Duration::from_secs(600);
/// The hub's code for a project the token has no grant on.
const NO_GRANT: &str = "policy_forbidden";

/// One entry of `POST /sync/mutations/push`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushEntry {
    pub project: String,
    pub entity: String,
    pub entity_key: String,
    pub op: String,
    pub payload: Value,
    /// The hub's idempotency key: `<node id>:<journal seq>`.
    pub mutation_id: String,
}

/// The body of `POST /sync/mutations/push`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushBody {
    pub entries: Vec<PushEntry>,
    pub created_by: String,
}

/// One mutation of `GET /sync/mutations/pull`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PulledMutation {
    pub seq: i64,
    pub project: String,
    pub entity: String,
    pub entity_key: String,
    pub op: String,
    pub payload: Value,
    #[serde(default)]
    pub mutation_id: Option<String>,
}

/// The answer of `GET /sync/mutations/pull`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PullPage {
    pub mutations: Vec<PulledMutation>,
    #[serde(default)]
    pub has_more: bool,
    #[serde(default)]
    pub latest_seq: i64,
}

/// How a request to the hub failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubFailure {
    /// No answer (refused connection, cut, timeout) or a 5xx: try again later.
    Unavailable(String),
    /// A 4xx: the hub's `error_code` and message. Sending the same again will not help.
    Refused { status: u16, code: String, message: String },
    /// An answer that is not the protocol.
    Invalid(String),
}

impl HubFailure {
    pub fn into_error(self, url: &str) -> CairnError {
        match self {
            HubFailure::Unavailable(why) => {
                CairnError::new(ErrorCode::RemoteUnreachable, format!("the hub {url} did not answer: {why}"))
                    .with_hint("the daemon retries with backoff; `cairn remote status` shows the last error")
            }
            HubFailure::Refused { status, code, message } => {
                CairnError::new(ErrorCode::RemoteRefused, format!("the hub {url} refused ({status} {code}): {message}"))
                    .with_hint(refusal_hint(&code))
            }
            HubFailure::Invalid(why) => {
                CairnError::new(ErrorCode::RemoteAnswerInvalid, format!("{url} is not a cairn hub: {why}"))
                    .with_hint("check the address given to `cairn remote add`")
            }
        }
    }
}

fn refusal_hint(code: &str) -> &'static str {
    match code {
        "token_unknown" | "token_revoked" | "token_expired" | "auth_required" => {
            "ask the hub's operator for a new token (`cairn hub token create`), then `cairn remote add URL --token T`"
        }
        "policy_forbidden" | "read_only_grant" => {
            "the token has no read-write grant for that project: limit the projects with `cairn remote add URL --token T --project P`"
        }
        _ => "see `cairn remote status`",
    }
}

/// How a round reaches the hub.
pub trait HubTransport: Send + Sync {
    fn push(&self, body: &PushBody) -> std::result::Result<Vec<i64>, HubFailure>;
    fn pull(&self, since: i64, limit: usize, project: Option<&str>) -> std::result::Result<PullPage, HubFailure>;
}

/// How a round reaches the store: each call is one short piece of work on the writer (never
/// held across a request to the hub).
pub trait SyncAccess {
    fn with_store<T: Send + 'static>(&self, f: impl FnOnce(&mut Store) -> Result<T> + Send + 'static) -> Result<T>;
}

impl SyncAccess for Mutex<Store> {
    fn with_store<T: Send + 'static>(&self, f: impl FnOnce(&mut Store) -> Result<T> + Send + 'static) -> Result<T> {
        f(&mut self.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// A project the hub would not take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProjectRefusal {
    pub project: String,
    /// The hub's `error_code` (`policy_forbidden`, `read_only_grant`, `payload_too_large`, …).
    pub hub_code: String,
    pub message: String,
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoundReport {
    /// Journal entries the hub acknowledged.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub pushed: usize,
    /// Mutations received from the hub (this store's own excluded).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub pulled: usize,
    pub applied: ApplyReport,
    pub refused: Vec<ProjectRefusal>,
    /// With every project syncing (no `projects` set): the projects the token has no grant
    /// for. They stay on this machine; not an error.
    #[serde(default)]
    pub not_granted: Vec<String>,
    /// Journal entries still to push (those of refused projects; not-granted ones not counted).
    pub pending: i64,
    /// The hub's last seq this store has applied.
    pub cursor: i64,
    /// Nothing left to push and nothing left to pull.
    pub in_sync: bool,
}

/// One push and one pull. An error when the hub did not answer or refused the token; a
/// project the hub refuses is in the report.
pub fn sync_round(access: &impl SyncAccess, hub: &dyn HubTransport, remote: &RemoteSettings) -> Result<RoundReport> {
    let mut report = RoundReport::default();
    push_pending(access, hub, remote, &mut report)?;
    pull_new(access, hub, remote, &mut report)?;
    let (settings, not_granted) = (remote.clone(), report.not_granted.clone());
    report.pending = access.with_store(move |s| remote_pending(s, &settings, &not_granted))?;
    report.in_sync = report.refused.is_empty() && report.pending == 0;
    Ok(report)
}

/// Push every covered project's pending journal.
fn push_pending(
    access: &impl SyncAccess,
    hub: &dyn HubTransport,
    remote: &RemoteSettings,
    report: &mut RoundReport,
) -> Result<()> {
    let settings = remote.clone();
    let (projects, node) = access.with_store(move |s| Ok((s.remote_enrol(&settings)?, s.sync_node_id()?)))?;
    let every_project = remote.projects.is_empty();
    for project in projects {
        if every_project && refused_grant_lately(access, remote.target_key(&project))? {
            report.not_granted.push(project);
            continue;
        }
        match push_project(access, hub, remote, &project, &node) {
            Ok(n) => report.pushed += n,
            Err(RoundError::Store(e)) => return Err(e),
            Err(RoundError::Hub(HubFailure::Refused { status, code, message })) if status != 401 => {
                let error = HubFailure::Refused { status, code: code.clone(), message: message.clone() }
                    .into_error(&remote.url);
                record_target_error(access, remote.target_key(&project), error)?;
                if every_project && code == NO_GRANT {
                    report.not_granted.push(project);
                } else {
                    report.refused.push(ProjectRefusal { project, hub_code: code, message });
                }
            }
            Err(RoundError::Hub(failure)) => {
                let error = failure.into_error(&remote.url);
                record_target_error(access, remote.target_key(&project), error.clone())?;
                return Err(error);
            }
        }
    }
    Ok(())
}

fn refused_grant_lately(access: &impl SyncAccess, target: String) -> Result<bool> {
    access.with_store(move |s| s.no_grant_lately(&target))
}

enum RoundError {
    Store(CairnError),
    Hub(HubFailure),
}

impl From<CairnError> for RoundError {
    fn from(e: CairnError) -> Self {
        RoundError::Store(e)
    }
}

/// Push one project's journal in batches until nothing is pending; the entries acknowledged.
fn push_project(
    access: &impl SyncAccess,
    hub: &dyn HubTransport,
    remote: &RemoteSettings,
    project: &str,
    node: &str,
) -> std::result::Result<usize, RoundError> {
    let target = remote.target_key(project);
    let mut pushed = 0;
    loop {
        let (key, name) = (target.clone(), project.to_owned());
        let pending = access.with_store(move |s| s.sync_pending(&key, Some(&name), PUSH_MAX_ENTRIES))?;
        let entries = fit_one_push(pending, node);
        let Some(last_seq) = entries.last().map(|(seq, _)| *seq) else { return Ok(pushed) };
        let body =
            PushBody { entries: entries.into_iter().map(|(_, e)| e).collect(), created_by: super::git::created_by() };
        let seqs = hub.push(&body).map_err(RoundError::Hub)?;
        if seqs.len() != body.entries.len() {
            return Err(RoundError::Hub(HubFailure::Invalid(format!(
                "{} seqs accepted for {} entries",
                seqs.len(),
                body.entries.len()
            ))));
        }
        let key = target.clone();
        access.with_store(move |s| s.sync_ack(&key, last_seq))?;
        pushed += body.entries.len();
    }
}

/// The oldest pending entries that fit in one push (at least one: a single entry over the
/// limit goes alone and the hub's refusal says so).
fn fit_one_push(pending: Vec<Mutation>, node: &str) -> Vec<(i64, PushEntry)> {
    let mut bytes = 0;
    let mut out = Vec::with_capacity(pending.len());
    for m in pending {
        let size = m.payload.to_string().len() + m.entity_key.len() + m.project.len() + 128;
        if !out.is_empty() && bytes + size > PUSH_MAX_BYTES {
            break;
        }
        bytes += size;
        let entry = PushEntry {
            mutation_id: format!("{node}:{}", m.seq),
            project: m.project,
            entity: m.entity,
            entity_key: m.entity_key,
            op: m.op,
            payload: m.payload,
        };
        out.push((m.seq, entry));
    }
    out
}

fn record_target_error(access: &impl SyncAccess, target: String, error: CairnError) -> Result<()> {
    let text = format!("{}: {}", error.code, error.message);
    access.with_store(move |s| s.sync_record_error(&target, &text))
}

/// Pull and apply every page after the cursor.
fn pull_new(
    access: &impl SyncAccess,
    hub: &dyn HubTransport,
    remote: &RemoteSettings,
    report: &mut RoundReport,
) -> Result<()> {
    let (source, scope) = (remote.source_key(), remote.scope_text());
    let (src, scp) = (source.clone(), scope.clone());
    let mut cursor = access.with_store(move |s| s.sync_pull_cursor(&src, &scp))?;
    let filter = match remote.projects.as_slice() {
        [one] => Some(one.as_str()),
        _ => None,
    };
    let mut restarted = false;
    loop {
        let page = match hub.pull(cursor, PULL_PAGE, filter) {
            Ok(page) => page,
            Err(failure) => {
                let error = failure.into_error(&remote.url);
                let (src, text) = (source.clone(), format!("{}: {}", error.code, error.message));
                access.with_store(move |s| s.sync_pull_error(&src, &text))?;
                return Err(error);
            }
        };
        let Some(last) = page.mutations.iter().map(|m| m.seq).max() else {
            // The hub was restored from an older backup: start again from its beginning.
            if page.latest_seq < cursor && !restarted {
                tracing::warn!(
                    cursor,
                    latest = page.latest_seq,
                    "the hub is behind this store's cursor; pulling from 0"
                );
                restarted = true;
                cursor = 0;
                continue;
            }
            break;
        };
        let wanted: Vec<PulledMutation> = page.mutations.into_iter().filter(|m| remote.covers(&m.project)).collect();
        let (src, scp) = (source.clone(), scope.clone());
        let (received, applied) = access.with_store(move |s| s.apply_pulled(&src, &scp, wanted, last))?;
        report.pulled += received;
        add_reports(&mut report.applied, &applied);
        cursor = last;
        if !page.has_more {
            break;
        }
    }
    report.cursor = cursor;
    let (src, scp) = (source, scope);
    access.with_store(move |s| s.sync_pull_recovered(&src, &scp, cursor))
}

fn add_reports(total: &mut ApplyReport, more: &ApplyReport) {
    total.applied += more.applied;
    total.skipped += more.skipped;
    total.conflicts += more.conflicts;
    total.deferred += more.deferred;
    total.deferred_applied += more.deferred_applied;
}

/// Journal entries not yet pushed to the hub, over the projects it covers and takes.
fn remote_pending(store: &Store, remote: &RemoteSettings, not_granted: &[String]) -> Result<i64> {
    let mut total = 0;
    for project in store.sync_projects()? {
        if remote.covers(&project) && !not_granted.contains(&project) {
            total += store.sync_pending_count(&remote.target_key(&project), Some(&project))?;
        }
    }
    Ok(total)
}

/// Whether the process named by a lease holder (`daemon:<pid>`, `cli:<pid>`) still runs: a
/// daemon stopped or killed before it gave the lease back does not block the next sync for
/// the lease's length. Where that cannot be known, it is taken to run.
fn holder_alive(holder: &str) -> bool {
    let Some(pid) = holder.rsplit(':').next().and_then(|p| p.parse::<u32>().ok()) else { return true };
    if pid == std::process::id() {
        return true;
    }
    let proc = std::path::Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}

/// One project's standing with the hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RemoteProjectStatus {
    pub project: String,
    /// Journal entries not pushed yet.
    pub pending: i64,
    /// With every project syncing: the token has no grant for it, so it stays here (asked
    /// again every ten minutes).
    pub not_granted: bool,
    pub last_pushed_seq: i64,
    pub last_push_at: Option<String>,
    pub last_error: Option<String>,
}

/// The phase of a data dir's sync with its hub when no daemon reports a live one.
pub const PHASE_NO_DAEMON: &str = "no_daemon";
/// `autosync = false`: only `cairn remote sync` syncs.
pub const PHASE_MANUAL: &str = "manual";

/// Where a data dir stands with its hub: what the store knows, and what the daemon's autosync
/// is doing (`phase`: `idle`, `syncing`, `backoff`, `refused`, `standby` while another process
/// holds the lease, `manual`, or `no_daemon`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RemoteStatus {
    pub phase: String,
    /// The last round's failure, while it lasts.
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    /// When the next round is due, while backing off.
    pub next_attempt_in_ms: Option<u64>,
    pub last_round_at: Option<String>,
    pub last_round: Option<RoundReport>,
    pub url: String,
    /// The projects that sync with it; empty: every project.
    pub projects: Vec<String>,
    pub autosync: bool,
    pub pending: i64,
    pub per_project: Vec<RemoteProjectStatus>,
    /// The hub's last seq applied here.
    pub cursor: i64,
    pub last_pull_at: Option<String>,
    pub last_pull_error: Option<String>,
    /// The process syncing now (`daemon:<pid>`, `cli:<pid>`), while its lease runs.
    pub lease_holder: Option<String>,
}

impl Store {
    /// Enrol the projects the hub covers (with `projects` empty: every project that holds
    /// memories), so their writes are journaled; the projects to push.
    pub fn remote_enrol(&mut self, remote: &RemoteSettings) -> Result<Vec<String>> {
        let wanted = if remote.projects.is_empty() { self.sync_known_projects()? } else { remote.projects.clone() };
        let enrolled = self.sync_projects()?;
        for project in &wanted {
            if !enrolled.contains(project) {
                self.sync_enrol(project)?;
            }
        }
        Ok(self.sync_projects()?.into_iter().filter(|p| remote.covers(p)).collect())
    }

    /// Where pulling from `source` resumes; 0 when the cursor was kept for other projects.
    pub fn sync_pull_cursor(&self, source: &str, scope: &str) -> Result<i64> {
        let row: Option<(i64, String)> = self
            .conn()
            .query_row("SELECT cursor, scope FROM sync_pulls WHERE source = ?1", [source], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        Ok(match row {
            Some((cursor, kept)) if kept == scope => cursor,
            _ => 0,
        })
    }

    /// Apply one pulled page from `source` and move its cursor to `cursor`, atomically. The
    /// projects in it are enrolled first, so edits made here travel back. This store's own
    /// mutations (the key `<node>:<seq>` of one of its journal entries) are skipped. The count
    /// of mutations received, and what applying them did.
    pub fn apply_pulled(
        &mut self,
        source: &str,
        scope: &str,
        page: Vec<PulledMutation>,
        cursor: i64,
    ) -> Result<(usize, ApplyReport)> {
        let node = self.sync_node_id()?;
        let mut mutations = Vec::with_capacity(page.len());
        for m in page {
            if !self.is_own_mutation(&node, &m)? {
                mutations.push(Mutation {
                    seq: m.seq,
                    project: m.project,
                    entity: m.entity,
                    entity_key: m.entity_key,
                    op: m.op,
                    payload: m.payload,
                });
            }
        }
        let enrolled = self.sync_projects()?;
        let mut new_projects: Vec<&str> = mutations
            .iter()
            .map(|m| m.project.as_str())
            .filter(|p| !p.is_empty() && !enrolled.iter().any(|e| e == p))
            .collect();
        new_projects.sort_unstable();
        new_projects.dedup();
        for project in new_projects.into_iter().map(str::to_owned).collect::<Vec<_>>() {
            self.sync_enrol(&project)?;
        }
        let now = self.now();
        let report = self.apply_mutations_then(source, &mutations, |tx| {
            tx.execute(
                "INSERT INTO sync_pulls (source, cursor, scope, last_pull_at, last_error) VALUES (?1, ?2, ?3, ?4, NULL)
                 ON CONFLICT (source) DO UPDATE SET cursor = excluded.cursor, scope = excluded.scope,
                    last_pull_at = excluded.last_pull_at, last_error = NULL",
                params![source, cursor, scope, now],
            )?;
            Ok(())
        })?;
        Ok((mutations.len(), report))
    }

    /// A mutation this store pushed: its key names this node and a journal entry of the same
    /// row (a copied data dir has the same node id, not the same journal).
    fn is_own_mutation(&self, node: &str, m: &PulledMutation) -> Result<bool> {
        let Some(seq) =
            m.mutation_id.as_deref().and_then(|id| id.strip_prefix(node)?.strip_prefix(':')?.parse::<i64>().ok())
        else {
            return Ok(false);
        };
        Ok(self
            .conn()
            .prepare_cached("SELECT 1 FROM sync_journal WHERE seq = ?1 AND entity_key = ?2 AND source = 'local'")?
            .exists(params![seq, m.entity_key])?)
    }

    /// A pull ended well: forget its last error (written only when there is one to forget, or
    /// no row yet, so a quiet round commits nothing).
    pub fn sync_pull_recovered(&mut self, source: &str, scope: &str, cursor: i64) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO sync_pulls (source, cursor, scope, last_pull_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (source) DO UPDATE SET last_error = NULL, last_pull_at = excluded.last_pull_at,
                    cursor = excluded.cursor, scope = excluded.scope
                 WHERE sync_pulls.last_error IS NOT NULL OR sync_pulls.scope != excluded.scope",
                params![source, cursor, scope, now],
            )?;
            Ok(())
        })
    }

    /// The hub said lately (within [`NOT_GRANTED_RETRY`]) that the token has no grant on this
    /// target's project.
    fn no_grant_lately(&self, target: &str) -> Result<bool> {
        let row: Option<(Option<String>, Option<String>)> = self
            .conn()
            .query_row("SELECT last_error, last_run_at FROM sync_targets WHERE target_key = ?1", [target], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let Some((Some(error), Some(at))) = row else { return Ok(false) };
        let retry = time::Duration::try_from(NOT_GRANTED_RETRY).unwrap_or_default();
        let recent = crate::clock::parse_ts(&at).is_some_and(|at| self.clock().now() - at < retry);
        Ok(recent && error.contains(&format!("403 {NO_GRANT}")))
    }

    /// Remember that pulling from `source` failed.
    pub fn sync_pull_error(&mut self, source: &str, error: &str) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO sync_pulls (source, last_pull_at, last_error) VALUES (?1, ?2, ?3)
                 ON CONFLICT (source) DO UPDATE SET last_pull_at = excluded.last_pull_at, last_error = excluded.last_error",
                params![source, now, error],
            )?;
            Ok(())
        })
    }

    /// Take (or renew) the sync lease for `holder` for `ttl`: `None` when taken, else who holds
    /// it. An expired lease is anyone's.
    pub fn sync_lease_take(&mut self, holder: &str, ttl: std::time::Duration) -> Result<Option<String>> {
        let now = self.clock().now();
        let (now_text, until) = (crate::clock::format_ts(now), crate::clock::format_ts(now + ttl));
        self.write(|tx| {
            let current: Option<(String, String)> = tx
                .query_row("SELECT holder, expires_at FROM sync_lease WHERE name = ?1", [LEASE], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            if let Some((other, expires)) = current
                && other != holder
                && expires > now_text
                && holder_alive(&other)
            {
                return Ok(Some(other));
            }
            tx.execute(
                "INSERT INTO sync_lease (name, holder, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at",
                params![LEASE, holder, until],
            )?;
            Ok(None)
        })
    }

    /// Give the lease back (only if `holder` has it).
    pub fn sync_lease_release(&mut self, holder: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM sync_lease WHERE name = ?1 AND holder = ?2", params![LEASE, holder])?;
            Ok(())
        })
    }

    /// The store's side of `cairn remote status` (the daemon fills in its autosync's phase).
    pub fn remote_status(&self, remote: &RemoteSettings) -> Result<RemoteStatus> {
        let mut per_project = Vec::new();
        for project in self.sync_projects()?.into_iter().filter(|p| remote.covers(p)) {
            let target = remote.target_key(&project);
            let row: Option<(i64, Option<String>, Option<String>)> = self
                .conn()
                .query_row(
                    "SELECT last_exported_seq, last_run_at, last_error FROM sync_targets WHERE target_key = ?1",
                    [&target],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            let (last_pushed_seq, last_push_at, last_error) = row.unwrap_or((0, None, None));
            let pending = self.sync_pending_count(&target, Some(&project))?;
            let not_granted = remote.projects.is_empty() && self.no_grant_lately(&target)?;
            per_project.push(RemoteProjectStatus {
                project,
                pending,
                not_granted,
                last_pushed_seq,
                last_push_at,
                last_error,
            });
        }
        let source = remote.source_key();
        let pull: Option<(i64, String, Option<String>, Option<String>)> = self
            .conn()
            .query_row(
                "SELECT cursor, scope, last_pull_at, last_error FROM sync_pulls WHERE source = ?1",
                [&source],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        let (cursor, last_pull_at, last_pull_error) = match pull {
            Some((cursor, scope, at, error)) if scope == remote.scope_text() => (cursor, at, error),
            Some((_, _, at, error)) => (0, at, error),
            None => (0, None, None),
        };
        let now = self.now();
        let lease_holder = self
            .conn()
            .query_row("SELECT holder FROM sync_lease WHERE name = ?1 AND expires_at > ?2", params![LEASE, now], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(RemoteStatus {
            phase: if remote.autosync { PHASE_NO_DAEMON } else { PHASE_MANUAL }.to_owned(),
            last_error: None,
            consecutive_failures: 0,
            next_attempt_in_ms: None,
            last_round_at: None,
            last_round: None,
            url: remote.url.clone(),
            projects: remote.projects.clone(),
            autosync: remote.autosync,
            pending: per_project.iter().filter(|p| !p.not_granted).map(|p| p.pending).sum(),
            per_project,
            cursor,
            last_pull_at,
            last_pull_error,
            lease_holder,
        })
    }
}
