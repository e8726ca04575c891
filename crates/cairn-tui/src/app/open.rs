//! Opening things (a memory, the conflicts queue, the trash, sessions, turns, parts) and a
//! memory's actions (edit, delete, restore, pin, judge).

use super::answers::section_part_id;
use super::{App, Detail, Effect, ListView, PART_PAGE, Scroll, SearchView, View, verdict_for_key};
use cairn_core::history::query::{MessageRequest, MessagesRequest, PartRequest, SessionsRequest, TurnsRequest};
use cairn_core::memory::{ListFilter, ObservationPatch};
use cairn_core::ops::{DeleteRequest, GetRequest, Op, PinRequest, RestoreRequest, TimelineRequest, UpdateRequest};
use cairn_core::relations::{Judgment, RelationFilter};

impl App {
    pub(super) fn open_selected(&mut self) {
        enum Next {
            Memory(i64),
            /// A conflict names its memories by sync id: find the first by its title.
            Relation(String),
            Session(String),
            Turn(String, String),
            Message(String, String),
            Part(String, PartRequest),
            Nothing,
        }
        let next = match self.view() {
            View::Dashboard(d) => d.recent.selected().map_or(Next::Nothing, |m| Next::Memory(m.id)),
            View::Search(s) => s.results.selected().map_or(Next::Nothing, |h| Next::Memory(h.hit.observation.id)),
            View::Conflicts(l) => {
                l.selected().and_then(|r| r.source_title.clone()).map_or(Next::Nothing, Next::Relation)
            }
            View::Sessions(l) => l.selected().map_or(Next::Nothing, |s| Next::Session(s.session_id.clone())),
            View::Turns { session, list } => {
                list.selected().map_or(Next::Nothing, |t| Next::Turn(session.clone(), t.user.message_id.clone()))
            }
            View::Messages { session, list } => {
                list.selected().map_or(Next::Nothing, |m| Next::Message(session.clone(), m.message_id.clone()))
            }
            View::Message { session, message: Some(message), list } => {
                match list.selected().and_then(section_part_id) {
                    Some(part_id) => Next::Part(
                        format!("{} · turn {}", message.role, message.turn_number),
                        PartRequest {
                            session_id: session.clone(),
                            message_id: message.message_id.clone(),
                            part_id,
                            offset: 0,
                            max_chars: PART_PAGE,
                            caller_session_id: None,
                        },
                    ),
                    None => Next::Nothing,
                }
            }
            View::HistorySearch(s) => s
                .results
                .selected()
                .map_or(Next::Nothing, |m| Next::Message(m.session_id.clone(), m.message_id.clone())),
            View::Detail(_) | View::Trash(_) | View::Message { .. } | View::Part { .. } => Next::Nothing,
        };
        match next {
            Next::Memory(id) => self.open_memory(id),
            Next::Relation(title) => {
                self.push(View::Search(SearchView { input: title, ..SearchView::default() }));
                self.run_search(true);
            }
            Next::Session(id) => self.open_turns(id),
            Next::Turn(session, message) => self.open_messages(session, message),
            Next::Message(session, message) => self.open_message(session, message),
            Next::Part(title, request) => self.open_part(title, request),
            Next::Nothing => {}
        }
    }

    pub fn open_memory(&mut self, id: i64) {
        let mut detail = Detail { id, ..Detail::default() };
        detail.loading.push(self.send(Op::Get(GetRequest { id, revisions: true })));
        detail.loading.push(self.send(Op::Timeline(TimelineRequest { id, before: 3, after: 3 })));
        self.push(View::Detail(Box::new(detail)));
    }

    pub(super) fn open_conflicts(&mut self) {
        let status = if self.verdicts_shown { "judged" } else { "pending" };
        let id = self.send(Op::Relations(RelationFilter {
            status: Some(status.into()),
            limit: Some(200),
            ..RelationFilter::default()
        }));
        self.push(View::Conflicts(ListView { loading: Some(id), ..ListView::default() }));
    }

    pub(super) fn open_trash(&mut self) {
        let id = self.send(Op::List(ListFilter { limit: 200, deleted: true, ..ListFilter::default() }));
        self.push(View::Trash(ListView { loading: Some(id), ..ListView::default() }));
    }

    pub(super) fn open_sessions(&mut self) {
        let id = self.send(Op::HistorySessions(SessionsRequest {
            project: None,
            query: None,
            host: None,
            limit: 200,
            include_children: false,
        }));
        self.push(View::Sessions(ListView { loading: Some(id), ..ListView::default() }));
    }

    pub(super) fn open_turns(&mut self, session: String) {
        let id = self.send(Op::HistoryBrowseTurns(TurnsRequest {
            session_id: session.clone(),
            turn_number: None,
            num_before: 50,
            num_after: 0,
            caller_session_id: None,
        }));
        self.push(View::Turns { session, list: ListView { loading: Some(id), ..ListView::default() } });
    }

    pub(super) fn open_messages(&mut self, session: String, message_id: String) {
        let id = self.send(Op::HistoryBrowseMessages(MessagesRequest {
            session_id: session.clone(),
            message_id: Some(message_id),
            num_before: 0,
            num_after: 50,
            caller_session_id: None,
        }));
        self.push(View::Messages { session, list: ListView { loading: Some(id), ..ListView::default() } });
    }

    pub(super) fn open_message(&mut self, session: String, message_id: String) {
        let id = self.send(Op::HistoryPullMessage(MessageRequest {
            session_id: session.clone(),
            message_id,
            caller_session_id: None,
        }));
        self.push(View::Message {
            session,
            message: None,
            list: ListView { loading: Some(id), ..ListView::default() },
        });
    }

    pub(super) fn open_part(&mut self, title: String, request: PartRequest) {
        let id = self.send(Op::HistoryPullPart(request.clone()));
        self.push(View::Part {
            title,
            text: String::new(),
            scroll: Scroll::default(),
            loading: Some(id),
            request: Some(request),
            wrapped: None,
        });
    }

    pub(super) fn detail_key(&mut self, c: char) {
        let View::Detail(detail) = self.view_mut() else { return };
        let confirming = std::mem::take(&mut detail.confirm_delete);
        let id = detail.id;
        let memory = detail.memory.as_ref().map(|m| m.observation.clone());
        match c {
            'r' => self.reload_detail(),
            'y' if confirming => {
                let op = Op::Delete(DeleteRequest { id, hard: false });
                self.write(op, format!("#{id} deleted (u restores it)"));
            }
            'd' if !self.refuse_read_only() => {
                if let View::Detail(d) = self.view_mut() {
                    d.confirm_delete = true;
                }
                self.status = format!("delete #{id}? y to confirm, any other key to keep it");
            }
            'u' if !self.refuse_read_only() => {
                self.write(Op::Restore(RestoreRequest { id }), format!("#{id} restored"));
            }
            'p' if !self.refuse_read_only() => {
                let pinned = !memory.as_ref().is_some_and(|m| m.pinned);
                let what = if pinned { "pinned" } else { "unpinned" };
                self.write(Op::Pin(PinRequest { id, pinned }), format!("#{id} {what}"));
            }
            'e' if !self.refuse_read_only() => match memory {
                Some(m) => self.effect = Some(Effect::Edit { id, content: m.content }),
                None => self.status = "the memory is not loaded yet".into(),
            },
            _ => {}
        }
    }

    /// The editor returned: save the content when it changed.
    pub fn edited(&mut self, id: i64, before: &str, after: Result<String, String>) {
        match after {
            Err(e) => self.status = format!("edit cancelled: {}", crate::text::one_line(&e, 200)),
            Ok(after) if after == before => self.status = "unchanged".into(),
            Ok(after) => {
                let patch = ObservationPatch { content: Some(after), ..ObservationPatch::default() };
                self.write(Op::Update(UpdateRequest { id, patch }), format!("#{id} saved"));
            }
        }
    }

    /// Send a write; on success `done` is shown and the view reloaded.
    pub(super) fn write(&mut self, op: Op, done: String) {
        if self.refuse_read_only() {
            return;
        }
        let kind = op.kind();
        let id = self.send(op);
        self.writes.push((id, done, kind));
        self.status = "saving…".into();
    }

    pub(super) fn reload_detail(&mut self) {
        let id = match self.view() {
            View::Detail(d) => d.id,
            _ => return,
        };
        let get = self.send(Op::Get(GetRequest { id, revisions: true }));
        let timeline = self.send(Op::Timeline(TimelineRequest { id, before: 3, after: 3 }));
        if let View::Detail(d) = self.view_mut() {
            d.loading = vec![get, timeline];
        }
    }

    pub(super) fn conflict_key(&mut self, c: char) {
        if c == 's' {
            self.start_scan();
            return;
        }
        if c == 'v' {
            self.verdicts_shown = !self.verdicts_shown;
            self.back();
            self.open_conflicts();
            return;
        }
        let Some(verdict) = verdict_for_key(c) else { return };
        if self.refuse_read_only() {
            return;
        }
        let View::Conflicts(list) = self.view() else { return };
        let Some(row) = list.selected() else { return };
        let judgment = Judgment {
            judgment_id: row.sync_id.clone(),
            relation: verdict.to_owned(),
            reason: Some("judged in cairn tui".into()),
            evidence: None,
            confidence: None,
            session_id: None,
            by_person: true,
        };
        self.write(Op::Judge(judgment), format!("judged: {verdict}"));
    }
}
