//! Sync with a hub (`cairn remote`, the daemon's autosync): one round pushes what the journal
//! holds for the hub and pulls what the hub has that this store has not applied.
//!
//! - **Push** reads each project's journal from the hub target's high-water mark, in batches
//!   that fit the hub's limits (100 entries, 8 MiB), each entry with an idempotency key
//!   `<node id>:<journal seq>`. The mark moves only when the hub answered for every entry: a
//!   seq (stored) or a refusal of that entry alone; the hub commits the entries it stores
//!   together or not at all, so a push with no answer is sent again and the hub hands back the
//!   seqs of its first commit.
//! - **Parking**: an entry the hub refused by itself (its code and reason), or one that could
//!   never be stored there and is not sent (a NUL character, which PostgreSQL refuses; an entry
//!   larger than a push), is parked: kept with its reason in `sync_parked`, shown by the status,
//!   never retried, and the mark moves past it so the entries after it go on. A later change of
//!   the same row that reaches the hub forgets it.
//! - **Pull** reads pages after the cursor and applies each page in one transaction with the
//!   cursor's move, so a crash leaves either both or neither. This store's own mutations coming
//!   back are recognised by their key and skipped.
//! - A project the hub refuses (no grant, read-only) is reported and the others go on; a token
//!   the hub refuses, or a hub that does not answer, ends the round.
//!
//! The transport ([`HubTransport`]) and the store access ([`SyncAccess`]) are given by the
//! caller: the daemon's engine, or the CLI's own store when no daemon runs.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

pub use cairn_wire::hub::HubErrorCode;
use cairn_wire::sync::{MAX_PULL_LIMIT, MAX_PUSH_BYTES, MAX_PUSH_ENTRIES};
pub use cairn_wire::sync::{PullResponse, PulledMutation, PushEntry, PushRequest, PushResponse, RejectedEntry};

use super::{ApplyReport, Mutation};
use crate::error::{CairnError, ErrorCode, Result};
use crate::settings::RemoteSettings;
use crate::store::sync_journal::{self, TargetRow};
pub use crate::store::sync_remote::ParkedEntry;
use crate::store::{Store, sync_remote};

/// Most entries in one push (the hub's limit).
pub const PUSH_MAX_ENTRIES: usize = MAX_PUSH_ENTRIES;
/// Most bytes of entries in one push: the hub's limit less 1 MiB of room for the envelope.
pub const PUSH_MAX_BYTES: usize = MAX_PUSH_BYTES - 1024 * 1024;
/// Mutations asked for per pull (the most a hub gives).
pub const PULL_PAGE: usize = MAX_PULL_LIMIT as usize;
/// The lease's name: one syncing process per data dir.
const LEASE: &str = "remote";
/// With every project syncing, a project the token has no grant for is asked about again
/// after this long (a grant may be added), not at every round.
const NOT_GRANTED_RETRY: std::time::Duration = std::time::Duration::from_secs(600);
/// The hub's code for a project the token has no grant on.
const NO_GRANT: HubErrorCode = HubErrorCode::PolicyForbidden;

/// Who parked an entry.
const REFUSED_BY_HUB: &str = "hub";
const REFUSED_BY_CLIENT: &str = "client";

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
    use HubErrorCode::{AuthRequired, PolicyForbidden, ReadOnlyGrant, TokenExpired, TokenRevoked, TokenUnknown};
    match HubErrorCode::from_name(code) {
        Some(TokenUnknown | TokenRevoked | TokenExpired | AuthRequired) => {
            "ask the hub's operator for a new token (`cairn hub token create`), then `cairn remote add URL --token T`"
        }
        Some(PolicyForbidden | ReadOnlyGrant) => {
            "the token has no read-write grant for that project: limit the projects with `cairn remote add URL --token T --project P`"
        }
        _ => "see `cairn remote status`",
    }
}

/// How a round reaches the hub.
pub trait HubTransport: Send + Sync {
    fn push(&self, body: &PushRequest) -> std::result::Result<PushResponse, HubFailure>;
    fn pull(&self, since: i64, limit: usize, project: Option<&str>) -> std::result::Result<PullResponse, HubFailure>;
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
    /// Journal entries the hub stored.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub pushed: usize,
    /// Journal entries parked in this round: refused by the hub one by one, or not sent.
    #[serde(default)]
    pub parked: Vec<ParkedEntry>,
    /// Mutations received from the hub (this store's own excluded).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub pulled: usize,
    pub applied: ApplyReport,
    pub refused: Vec<ProjectRefusal>,
    /// With every project syncing (no `projects` set): the projects the token has no grant
    /// for. They stay on this machine; not an error.
    #[serde(default)]
    pub not_granted: Vec<String>,
    /// Journal entries still to push (those of refused projects; not-granted and parked ones not
    /// counted).
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
            Ok(done) => {
                report.pushed += done.pushed;
                report.parked.extend(done.parked);
            }
            Err(RoundError::Store(e)) => return Err(e),
            Err(RoundError::Hub(HubFailure::Refused { status, code, message })) if status != 401 => {
                let error = HubFailure::Refused { status, code: code.clone(), message: message.clone() }
                    .into_error(&remote.url);
                record_target_error(access, remote.target_key(&project), error)?;
                if every_project && code == NO_GRANT.as_str() {
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

/// What pushing one project did.
#[derive(Default)]
struct Pushed {
    pushed: usize,
    parked: Vec<ParkedEntry>,
}

/// An entry the hub stored: its row and journal seq (parked entries of the row before it are
/// forgotten).
type Delivered = (String, String, i64);

/// Push one project's journal in batches until nothing is pending.
fn push_project(
    access: &impl SyncAccess,
    hub: &dyn HubTransport,
    remote: &RemoteSettings,
    project: &str,
    node: &str,
) -> std::result::Result<Pushed, RoundError> {
    let target = remote.target_key(project);
    let mut done = Pushed::default();
    loop {
        let (key, name) = (target.clone(), project.to_owned());
        let pending = access.with_store(move |s| s.sync_pending(&key, Some(&name), PUSH_MAX_ENTRIES))?;
        let Some(Batch { through, send, mut parked }) = plan_push(pending, node) else { return Ok(done) };
        let mut delivered: Vec<Delivered> = Vec::with_capacity(send.len());
        if !send.is_empty() {
            let (seqs, entries): (Vec<i64>, Vec<PushEntry>) = send.into_iter().unzip();
            let body = PushRequest { entries, created_by: Some(super::created_by()) };
            let answer = hub.push(&body).map_err(RoundError::Hub)?;
            let refusals = refusals(answer, body.entries.len()).map_err(RoundError::Hub)?;
            for ((seq, entry), refusal) in seqs.into_iter().zip(body.entries).zip(refusals) {
                match refusal {
                    None => delivered.push((entry.entity, entry.entity_key, seq)),
                    Some(r) => parked.push(ParkedEntry {
                        project: entry.project,
                        entity: entry.entity,
                        entity_key: entry.entity_key,
                        seq,
                        code: r.error_code,
                        reason: r.error,
                        refused_by: REFUSED_BY_HUB.into(),
                        parked_at: String::new(),
                    }),
                }
            }
        }
        done.pushed += delivered.len();
        let key = target.clone();
        let recorded = access.with_store(move |s| s.sync_ack_push(&key, through, parked, &delivered))?;
        done.parked.extend(recorded);
    }
}

/// The hub's refusal of each entry sent (`None`: stored), once the answer is seen to account
/// for every entry exactly once.
fn refusals(answer: PushResponse, sent: usize) -> std::result::Result<Vec<Option<RejectedEntry>>, HubFailure> {
    let (stored, refused) = (answer.accepted_seqs.len(), answer.rejected.len());
    if stored + refused != sent {
        return Err(HubFailure::Invalid(format!(
            "{stored} seqs accepted and {refused} entries refused for {sent} entries"
        )));
    }
    let mut per_entry = vec![None; sent];
    for r in answer.rejected {
        match per_entry.get_mut(r.index) {
            Some(slot @ None) => *slot = Some(r),
            _ => return Err(HubFailure::Invalid(format!("a refusal of entry {} of a push of {sent}", r.index))),
        }
    }
    Ok(per_entry)
}

/// One push's worth of pending entries: those to send, those parked without sending (at least
/// one of either), and the last journal seq they cover.
struct Batch {
    through: i64,
    send: Vec<(i64, PushEntry)>,
    parked: Vec<ParkedEntry>,
}

/// The oldest pending entries that fit in one push, less those a hub could never store, which
/// are parked; `None` when nothing is pending.
fn plan_push(pending: Vec<Mutation>, node: &str) -> Option<Batch> {
    let mut batch = Batch { through: 0, send: Vec::with_capacity(pending.len()), parked: Vec::new() };
    let mut bytes = 0;
    for m in pending {
        let size = m.payload.to_string().len() + m.entity_key.len() + m.project.len() + 128;
        if let Some((code, reason)) = unsendable(&m, size) {
            batch.through = m.seq;
            batch.parked.push(ParkedEntry {
                project: m.project,
                entity: m.entity,
                entity_key: m.entity_key,
                seq: m.seq,
                code: code.to_owned(),
                reason,
                refused_by: REFUSED_BY_CLIENT.into(),
                parked_at: String::new(),
            });
            continue;
        }
        if !batch.send.is_empty() && bytes + size > PUSH_MAX_BYTES {
            break;
        }
        bytes += size;
        batch.through = m.seq;
        let entry = PushEntry {
            mutation_id: Some(format!("{node}:{}", m.seq)),
            project: m.project,
            entity: m.entity,
            entity_key: m.entity_key,
            op: m.op,
            payload: m.payload,
        };
        batch.send.push((m.seq, entry));
    }
    (batch.through > 0).then_some(batch)
}

/// Why a journal entry cannot go to a hub at all, with the code the hub would answer: a NUL
/// character (PostgreSQL stores none, in text or JSONB), or more bytes than one push carries.
fn unsendable(m: &Mutation, size: usize) -> Option<(&'static str, String)> {
    let fields = [("project", &m.project), ("entity", &m.entity), ("entity_key", &m.entity_key), ("op", &m.op)];
    let nul = fields
        .iter()
        .find(|(_, value)| value.contains('\0'))
        .map(|(name, _)| (*name).to_owned())
        .or_else(|| crate::text::nul_path(&m.payload).map(|path| format!("payload.{path}")));
    if let Some(field) = nul {
        let reason = format!(
            "{field} holds a NUL character (U+0000), which a hub cannot store; edit the memory to send it again"
        );
        return Some((ErrorCode::NulCharacter.as_str(), reason));
    }
    (size > PUSH_MAX_BYTES).then(|| {
        let reason = format!("the entry is {size} bytes; one push carries at most {PUSH_MAX_BYTES}");
        (ErrorCode::PayloadTooLarge.as_str(), reason)
    })
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
    /// Journal entries parked: the hub will not take them (see `RemoteStatus::parked_entries`).
    #[serde(default)]
    pub parked: i64,
}

/// Parked entries the status lists (the count covers them all).
pub const PARKED_SHOWN: usize = 20;

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
    /// Journal entries parked over every project: refused by the hub one by one, or not sent.
    /// They are not retried; a later change of the same row sends it again.
    #[serde(default)]
    pub parked: i64,
    /// The newest parked entries (at most [`PARKED_SHOWN`]), with their reasons.
    #[serde(default)]
    pub parked_entries: Vec<ParkedEntry>,
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
        Ok(match self.sync_pull_row(source)? {
            Some(pull) if pull.scope == scope => pull.cursor,
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
        let report = self
            .apply_mutations_then(source, &mutations, |tx| sync_remote::record_pull(tx, source, cursor, scope, &now))?;
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
        self.sync_local_entry_exists(seq, &m.entity_key)
    }

    /// The hub said lately (within [`NOT_GRANTED_RETRY`]) that the token has no grant on this
    /// target's project.
    fn no_grant_lately(&self, target: &str) -> Result<bool> {
        let row = self.sync_target_row(target)?;
        let Some(TargetRow { last_error: Some(error), last_run_at: Some(at), .. }) = row else { return Ok(false) };
        let retry = time::Duration::try_from(NOT_GRANTED_RETRY).unwrap_or_default();
        let recent = crate::clock::parse_ts(&at).is_some_and(|at| self.clock().now() - at < retry);
        Ok(recent && error.contains(&format!("403 {}", NO_GRANT.as_str())))
    }

    /// After a push to `target_key`: record the entries `parked` (those a later entry of the
    /// same row in `delivered` already supersedes are dropped), forget the parked entries of
    /// the rows `delivered` has now reached the hub with, and move the mark to `through`, in one
    /// transaction. The entries parked, as recorded.
    pub fn sync_ack_push(
        &mut self,
        target_key: &str,
        through: i64,
        mut parked: Vec<ParkedEntry>,
        delivered: &[(String, String, i64)],
    ) -> Result<Vec<ParkedEntry>> {
        let now = self.now();
        parked.retain(|p| {
            !delivered.iter().any(|(entity, key, seq)| *entity == p.entity && *key == p.entity_key && *seq > p.seq)
        });
        parked.sort_by_key(|p| p.seq);
        for p in &mut parked {
            p.parked_at.clone_from(&now);
        }
        self.write(|tx| {
            sync_remote::park(tx, target_key, &parked)?;
            sync_remote::forget_parked(tx, target_key, delivered)?;
            sync_journal::record_ack(tx, target_key, through, &now)?;
            Ok(parked)
        })
    }

    /// Take (or renew) the sync lease for `holder` for `ttl`: `None` when taken, else who holds
    /// it. An expired lease is anyone's.
    pub fn sync_lease_take(&mut self, holder: &str, ttl: std::time::Duration) -> Result<Option<String>> {
        let now = self.clock().now();
        let (now_text, until) = (crate::clock::format_ts(now), crate::clock::format_ts(now + ttl));
        self.write(|tx| {
            let current = sync_remote::lease(tx, LEASE)?;
            if let Some((other, expires)) = current
                && other != holder
                && expires > now_text
                && holder_alive(&other)
            {
                return Ok(Some(other));
            }
            sync_remote::set_lease(tx, LEASE, holder, &until)?;
            Ok(None)
        })
    }

    /// Give the lease back (only if `holder` has it).
    pub fn sync_lease_release(&mut self, holder: &str) -> Result<()> {
        self.write(|tx| sync_remote::release_lease(tx, LEASE, holder))
    }

    /// The store's side of `cairn remote status` (the daemon fills in its autosync's phase).
    pub fn remote_status(&self, remote: &RemoteSettings) -> Result<RemoteStatus> {
        let mut per_project = Vec::new();
        let mut parked_entries = Vec::new();
        for project in self.sync_projects()?.into_iter().filter(|p| remote.covers(p)) {
            let target = remote.target_key(&project);
            let (last_pushed_seq, last_push_at, last_error) = match self.sync_target_row(&target)? {
                Some(row) => (row.last_exported_seq, row.last_run_at, row.last_error),
                None => (0, None, None),
            };
            let pending = self.sync_pending_count(&target, Some(&project))?;
            let not_granted = remote.projects.is_empty() && self.no_grant_lately(&target)?;
            let (parked, newest) = self.sync_parked(&target, PARKED_SHOWN)?;
            parked_entries.extend(newest);
            per_project.push(RemoteProjectStatus {
                project,
                pending,
                not_granted,
                last_pushed_seq,
                last_push_at,
                last_error,
                parked,
            });
        }
        parked_entries.sort_by(|a, b| b.parked_at.cmp(&a.parked_at).then(b.seq.cmp(&a.seq)));
        parked_entries.truncate(PARKED_SHOWN);
        let source = remote.source_key();
        let (cursor, last_pull_at, last_pull_error) = match self.sync_pull_row(&source)? {
            Some(pull) if pull.scope == remote.scope_text() => (pull.cursor, pull.last_pull_at, pull.last_error),
            Some(pull) => (0, pull.last_pull_at, pull.last_error),
            None => (0, None, None),
        };
        let now = self.now();
        let lease_holder = self.sync_lease_holder(LEASE, &now)?;
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
            parked: per_project.iter().map(|p| p.parked).sum(),
            parked_entries,
            per_project,
            cursor,
            last_pull_at,
            last_pull_error,
            lease_holder,
        })
    }
}
