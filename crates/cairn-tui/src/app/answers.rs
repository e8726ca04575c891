//! Answers from the workers, matched to the view that asked, and what a write reloads.

use super::{App, PART_MAX, Response, View, error_line};
use cairn_core::history::query::{PartRequest, Section};
use cairn_core::ops::{Op, OpKind, OpOutput};
use cairn_core::relations::RelationFilter;

impl App {
    pub fn on_response(&mut self, response: Response) {
        let Response { id, result } = response;
        if self.scan_answered(id, &result) {
            return;
        }
        if let Some(at) = self.writes.iter().position(|(w, _, _)| *w == id) {
            let (_, done, kind) = self.writes.remove(at);
            match result {
                Ok(_) => {
                    self.status = done;
                    self.after_write(kind);
                }
                Err(e) => self.status = error_line(&e),
            }
            return;
        }
        let mut follow_up = None;
        for view in &mut self.stack {
            if let Some(next) = answer(view, id, &result) {
                follow_up = next;
                break;
            }
        }
        match follow_up {
            Some(FollowUp::Relations { project }) => {
                let id = self.send(Op::Relations(RelationFilter {
                    project: Some(project),
                    limit: Some(500),
                    ..RelationFilter::default()
                }));
                if let Some(View::Detail(d)) = self.stack.iter_mut().rev().find(|v| matches!(v, View::Detail(_))) {
                    d.loading.push(id);
                }
            }
            Some(FollowUp::NextPage(request)) => {
                let id = self.send(Op::HistoryPullPart(request.clone()));
                if let Some(View::Part { loading, request: slot, .. }) = self.stack.last_mut() {
                    *loading = Some(id);
                    *slot = Some(request);
                }
            }
            None => {}
        }
    }

    /// After a write: reload what shows it. A deleted memory cannot be read back (`get`
    /// answers live ones), so it stays on screen marked deleted, ready for `u`.
    pub(super) fn after_write(&mut self, kind: OpKind) {
        match self.view_mut() {
            View::Detail(d) if kind == OpKind::Delete => {
                if let Some(got) = d.memory.as_mut() {
                    got.observation.deleted_at = Some("now".into());
                }
                d.version += 1;
            }
            View::Detail(d) => {
                d.error = None;
                self.reload_detail();
            }
            View::Conflicts(_) => {
                self.back();
                self.open_conflicts();
            }
            View::Trash(_) => {
                self.back();
                self.open_trash();
            }
            _ => {}
        }
    }
}

/// What an answer asks for next.
pub(super) enum FollowUp {
    /// The memory is loaded: its project's relations.
    Relations { project: String },
    /// A part's next page.
    NextPage(PartRequest),
}

/// Give `result` to `view` when it asked for `id`: `Some` when it did.
pub(super) fn answer(view: &mut View, id: u64, result: &cairn_core::Result<OpOutput>) -> Option<Option<FollowUp>> {
    let error = result.as_ref().err().map(error_line);
    match (view, result.as_ref().ok()) {
        (View::Dashboard(d), output) if d.loading.contains(&id) => {
            d.loading.retain(|l| *l != id);
            match output {
                Some(OpOutput::Stats(stats)) => d.stats = Some(stats.clone()),
                Some(OpOutput::List(items)) => d.recent.fill(items.clone()),
                Some(OpOutput::RelationStats(stats)) => {
                    d.pending_review = Some(stats.by_judgment_status.get("pending").copied().unwrap_or(0));
                }
                Some(OpOutput::SyncStatus(status)) => d.sync = Some(Box::new(status.clone())),
                // The sync line is a detail: its failure does not hide the dashboard.
                None if id == d.sync_request => d.sync = None,
                _ => d.error = error,
            }
            Some(None)
        }
        (View::Search(s), output) if id == s.sent || (id > s.shown && id < s.sent) => {
            if id < s.shown {
                return Some(None);
            }
            match output {
                Some(OpOutput::Search(found)) => {
                    s.shown = id;
                    s.results.fill(found.hits.clone());
                    s.response = Some(found.clone());
                    s.shown_query.clone_from(&s.input);
                }
                _ => s.results.error = error,
            }
            Some(None)
        }
        (View::Detail(d), output) if d.loading.contains(&id) => {
            d.loading.retain(|l| *l != id);
            d.version += 1;
            match output {
                Some(OpOutput::Get(got)) => {
                    let project = got.observation.project.clone();
                    let sync_id = got.observation.sync_id.clone();
                    d.memory = Some(got.clone());
                    d.relations.retain(|r| r.source_id == sync_id || r.target_id == sync_id);
                    return Some(Some(FollowUp::Relations { project }));
                }
                Some(OpOutput::Timeline(timeline)) => d.timeline = Some(timeline.clone()),
                Some(OpOutput::Relations(page)) => {
                    let sync_id = d.memory.as_ref().map(|m| m.observation.sync_id.as_str()).unwrap_or_default();
                    d.relations = page
                        .relations
                        .iter()
                        .filter(|r| r.source_id == sync_id || r.target_id == sync_id)
                        .cloned()
                        .collect();
                }
                _ => d.error = error,
            }
            Some(None)
        }
        (View::Conflicts(list), output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::Relations(page)) => list.fill(page.relations.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Trash(list), output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::List(items)) => list.fill(items.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Sessions(list), output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistorySessions(sessions)) => list.fill(sessions.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Turns { list, .. }, output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistoryBrowseTurns(page)) => {
                    list.fill(page.turns.clone());
                    list.jump(true);
                }
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Messages { list, .. }, output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistoryBrowseMessages(page)) => list.fill(page.messages.clone()),
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Message { message, list, .. }, output) if list.loading == Some(id) => {
            match output {
                Some(OpOutput::HistoryPullMessage(pulled)) => {
                    list.fill(pulled.sections.clone());
                    *message = Some(pulled.clone());
                }
                _ => list.error = error,
            }
            list.loading = None;
            Some(None)
        }
        (View::Part { text, loading, request, .. }, output) if *loading == Some(id) => {
            *loading = None;
            match output {
                Some(OpOutput::HistoryPullPart(page)) => {
                    text.push_str(&page.content);
                    match (page.next_offset, request.as_ref()) {
                        (Some(offset), _) if text.len() >= PART_MAX => text.push_str(&format!(
                            "\n[cut at {PART_MAX} bytes of {} characters: `cairn history part` from offset {offset}]",
                            page.total_chars
                        )),
                        (Some(offset), Some(request)) => {
                            let next = PartRequest { offset: offset as usize, ..request.clone() };
                            return Some(Some(FollowUp::NextPage(next)));
                        }
                        _ => {}
                    }
                }
                _ => text.push_str(&format!("\n[{}]", error.unwrap_or_default())),
            }
            Some(None)
        }
        (View::HistorySearch(s), output) if s.results.loading == Some(id) => {
            match output {
                Some(OpOutput::HistorySearch(found)) => s.results.fill(found.messages.clone()),
                _ => s.results.error = error,
            }
            s.results.loading = None;
            Some(None)
        }
        _ => None,
    }
}

pub(super) fn section_part_id(section: &Section) -> Option<String> {
    match section {
        Section::Text { part_id, .. } | Section::Reasoning { part_id, .. } | Section::Tool { part_id, .. } => {
            part_id.clone()
        }
        Section::Image { .. } | Section::File { .. } => None,
    }
}
