//! Where sync stands, over every way a store syncs: the journal and its targets, the
//! repository's chunk folders ([`super::git`]) and the hub ([`super::remote`]). It reads both;
//! neither reads it, so git and remote sync stay apart.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::git::{FolderStatus, Layout};
use super::remote::RemoteStatus;
use crate::error::Result;
use crate::store::Store;
use crate::store::sync_journal::TargetRow;

/// One export target (a chunk folder and project, or a hub).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TargetStatus {
    pub target_key: String,
    pub last_exported_seq: i64,
    /// Journal entries not yet sent there.
    pub pending: i64,
    pub last_run_at: Option<String>,
    pub last_error: Option<String>,
}

/// Where a data dir's sync stands: the journal, every target, the repository's chunk folders
/// and the hub (`cairn sync status`, `GET /sync/status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SyncStatus {
    /// Whether any project syncs.
    pub enabled: bool,
    pub projects: Vec<String>,
    pub node_id: String,
    /// The journal's last seq.
    pub journal_seq: i64,
    pub targets: Vec<TargetStatus>,
    /// The repository's chunk folders, when a directory was given.
    pub folders: Vec<FolderStatus>,
    /// Relations waiting for their memories, and those given up.
    pub deferred_pending: i64,
    pub deferred_dead: i64,
    /// The hub this data dir syncs with (`cairn remote`), when one is set.
    pub remote: Option<RemoteStatus>,
    /// Why `[sync]` in config.toml could not be read, when it could not.
    pub remote_config_error: Option<String>,
}

impl Store {
    /// Enrolled projects, export targets and their pending counts, and (with `dir`) the
    /// repository's chunk folders.
    pub fn sync_status(&self, dir: Option<&Path>) -> Result<SyncStatus> {
        let projects = self.sync_projects()?;
        let rows = self.sync_target_rows()?;
        let mut targets = Vec::with_capacity(rows.len());
        for row in rows {
            let project = row.target_key.split_once('#').map(|(_, p)| p.to_owned());
            let pending = self.sync_pending_count(&row.target_key, project.as_deref())?;
            let TargetRow { target_key, last_exported_seq, last_run_at, last_error } = row;
            targets.push(TargetStatus { target_key, last_exported_seq, pending, last_run_at, last_error });
        }
        let mut folders = Vec::new();
        if let Some(dir) = dir {
            for layout in [Layout::Cairn, Layout::Engram] {
                folders.extend(self.folder_status(dir, layout)?);
            }
        }
        let (remote, remote_config_error) = match self.data_dir().map(crate::settings::load_remote) {
            Some(Ok(Some(settings))) => (Some(self.remote_status(&settings)?), None),
            Some(Err(e)) => (None, Some(e.message)),
            _ => (None, None),
        };
        Ok(SyncStatus {
            enabled: !projects.is_empty(),
            projects,
            node_id: self.sync_node_id()?,
            journal_seq: self.sync_journal_seq()?,
            targets,
            folders,
            deferred_pending: self.sync_deferred_count("pending")?,
            deferred_dead: self.sync_deferred_count("dead")?,
            remote,
            remote_config_error,
        })
    }
}
