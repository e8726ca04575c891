//! The archive's owner: `history.db` of one data dir, opened and migrated at first use, and the
//! projects' own `[history]` tables read for it. It sits beside the memory store in the core's
//! context (`cairn_core::Core`), never inside it: the two share no rule and no file.

use std::path::{Path, PathBuf};

use super::store::{HISTORY_DB_FILE, HistoryDb};
use cairn_base::error::Result;
use cairn_base::settings::HistorySettings;
use cairn_base::settings::history::ProjectConfigs;

/// The conversation-history archive of one data dir (in memory without one).
#[derive(Default)]
pub struct HistoryArchive {
    data_dir: Option<PathBuf>,
    db: Option<HistoryDb>,
    /// Projects' own `[history]` tables, read once per change of their file.
    project_configs: ProjectConfigs,
}

impl std::fmt::Debug for HistoryArchive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryArchive")
            .field("data_dir", &self.data_dir)
            .field("open", &self.db.is_some())
            .finish_non_exhaustive()
    }
}

impl HistoryArchive {
    /// The archive of `data_dir` (`None`: a private one in memory), not opened yet.
    pub fn in_data_dir(data_dir: Option<&Path>) -> HistoryArchive {
        HistoryArchive { data_dir: data_dir.map(Path::to_owned), ..HistoryArchive::default() }
    }

    /// The data dir the archive's file is in (`None` in memory).
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// The archive's database: `history.db` in the data dir (in memory without one), opened and
    /// migrated at first use. A separate file so a gigabyte of transcripts neither bloats the
    /// memory store nor queues behind its writer.
    pub fn db(&mut self) -> Result<&mut HistoryDb> {
        if self.db.is_none() {
            let db = match self.data_dir.as_deref() {
                Some(dir) => HistoryDb::open(&dir.join(HISTORY_DB_FILE))?,
                None => HistoryDb::open_in_memory()?,
            };
            self.db = Some(db);
        }
        Ok(self.db.as_mut().expect("opened above"))
    }

    /// The `[history]` settings for a session working in `dir`: `global`, under the project's
    /// own table when it has one.
    pub fn settings_for(&mut self, global: &HistorySettings, dir: &Path) -> Result<HistorySettings> {
        self.project_configs.for_directory(global, dir)
    }
}
