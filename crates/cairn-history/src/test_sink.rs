//! A history store in memory with the store's apply rules, for the readers' and the driver's
//! tests (the real store is `store.rs`; these tests do not depend on it).

use std::collections::BTreeMap;

use super::ingest::{HistorySink, SinkOutcome, SourceRef};
use super::model::{Cursor, HistoryMessage, HistoryPart, HistorySession, IngestBatch, ToolStatus};
use cairn_base::error::Result;

#[derive(Default)]
pub struct MemorySink {
    pub cursors: BTreeMap<String, Cursor>,
    pub sessions: BTreeMap<String, HistorySession>,
    pub messages: BTreeMap<String, HistoryMessage>,
    pub parts: BTreeMap<String, HistoryPart>,
    pub skipped: BTreeMap<String, u64>,
    pub errors: Vec<(String, String)>,
    pub applies: usize,
}

impl MemorySink {
    pub fn messages_of(&self, session: &str) -> Vec<&HistoryMessage> {
        let mut out: Vec<&HistoryMessage> = self.messages.values().filter(|m| m.session_id == session).collect();
        out.sort_by(|a, b| (a.seq, &a.id).cmp(&(b.seq, &b.id)));
        out
    }

    pub fn parts_of(&self, message: &str) -> Vec<&HistoryPart> {
        let mut out: Vec<&HistoryPart> = self.parts.values().filter(|p| p.message_id == message).collect();
        out.sort_by_key(|p| p.idx);
        out
    }

    pub fn text_of(&self, message: &str) -> String {
        self.parts_of(message).iter().filter_map(|p| p.text.clone()).collect::<Vec<_>>().join("\n")
    }
}

impl HistorySink for MemorySink {
    fn cursor(&self, source_key: &str) -> Result<Option<Cursor>> {
        Ok(self.cursors.get(source_key).cloned())
    }

    fn apply(
        &mut self,
        source: &SourceRef,
        expected: Option<&Cursor>,
        batch: &IngestBatch,
        next: &Cursor,
    ) -> Result<SinkOutcome> {
        if self.cursors.get(&source.key) != expected {
            return Ok(SinkOutcome::Stale);
        }
        self.applies += 1;
        for s in &batch.sessions {
            let merged = match self.sessions.remove(&s.id) {
                None => s.clone(),
                Some(old) => HistorySession {
                    project: s.project.clone().or(old.project),
                    directory: s.directory.clone().or(old.directory),
                    parent_id: s.parent_id.clone().or(old.parent_id),
                    title: s.title.clone().or(old.title),
                    agent: s.agent.clone().or(old.agent),
                    model: s.model.clone().or(old.model),
                    created_at: if old.created_at.is_empty()
                        || (!s.created_at.is_empty() && s.created_at < old.created_at)
                    {
                        s.created_at.clone()
                    } else {
                        old.created_at
                    },
                    updated_at: s.updated_at.clone().max(old.updated_at),
                    ..s.clone()
                },
            };
            self.sessions.insert(s.id.clone(), merged);
        }
        for m in &batch.messages {
            self.messages.insert(m.id.clone(), m.clone());
        }
        for p in &batch.parts {
            self.parts.insert(p.id.clone(), p.clone());
        }
        for r in &batch.results {
            if let Some(p) = self
                .parts
                .values_mut()
                .find(|p| p.session_id == r.session_id && p.call_id.as_deref() == Some(&r.call_id))
            {
                p.status = Some(if r.is_error { ToolStatus::Error } else { ToolStatus::Completed });
                p.output = Some(r.output.clone());
            }
        }
        for (reason, n) in &batch.skipped {
            *self.skipped.entry(reason.clone()).or_default() += n;
        }
        self.cursors.insert(source.key.clone(), next.clone());
        Ok(SinkOutcome::Applied)
    }

    fn record_error(&mut self, source: &SourceRef, code: &str, _message: &str) -> Result<()> {
        self.errors.push((source.key.clone(), code.to_owned()));
        Ok(())
    }
}

/// A temp HOME with the recorded session files of `tests/fixtures/history/<fixture>` copied
/// into `<HOME>/<target>`, as the host keeps them; the HOME and the path of the last file.
pub fn home_with_fixture(fixture: &str, target: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(target);
    std::fs::create_dir_all(&dir).unwrap();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history").join(fixture);
    let mut copied = None;
    for entry in std::fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        let path = dir.join(entry.file_name());
        std::fs::copy(entry.path(), &path).unwrap();
        copied = Some(path);
    }
    (tmp, copied.expect("the fixture holds a file"))
}

/// The environment of a scan whose HOME is `home`.
pub fn env_for(home: &std::path::Path) -> impl Fn(&str) -> Option<String> + use<> {
    let home = home.to_path_buf();
    move |name| (name == "HOME").then(|| home.display().to_string())
}
