//! Search as you type, and its filters (project, type, scope).

use super::{App, Filter, HistorySearchView, Lane, SearchView, View, next_choice};
use cairn_core::history::query::SearchRequest as HistorySearchRequest;
use cairn_core::ops::Op;
use cairn_core::search::SearchQuery;
use cairn_core::text::Scope;

impl App {
    /// `/`: the history's search on a history screen, else the memories'.
    pub(super) fn start_search(&mut self) {
        if self.view().in_history() {
            if let View::HistorySearch(s) = self.view_mut() {
                s.editing = true;
                return;
            }
            self.push(View::HistorySearch(HistorySearchView { editing: true, ..HistorySearchView::default() }));
            return;
        }
        if let View::Search(s) = self.view_mut() {
            s.editing = true;
            return;
        }
        self.push(View::Search(SearchView { editing: true, ..SearchView::default() }));
    }

    /// Send the query as it stands (as you type), or `submit` it: run it even when unchanged,
    /// and move to the results.
    pub(super) fn run_search(&mut self, submit: bool) {
        let op = match self.view() {
            View::Search(s) => {
                if s.input.trim().is_empty() {
                    None
                } else {
                    Some(Op::Search(SearchQuery {
                        text: s.input.clone(),
                        project: s.project.clone(),
                        all_projects: s.project.is_none(),
                        kind: s.kind.clone(),
                        scope: s.scope,
                        limit: 50,
                        ..SearchQuery::default()
                    }))
                }
            }
            View::HistorySearch(s) => (submit && !s.input.trim().is_empty()).then(|| {
                Op::HistorySearch(HistorySearchRequest {
                    query: s.input.clone(),
                    session_id: None,
                    project: None,
                    literal: false,
                    kinds: None,
                    caller_session_id: None,
                })
            }),
            _ => None,
        };
        let id = op.map(|op| self.send_as(op, Lane::NewestOnly));
        match self.view_mut() {
            View::Search(s) => {
                match id {
                    Some(id) => s.sent = id,
                    None if s.input.trim().is_empty() => {
                        s.results.fill(Vec::new());
                        s.response = None;
                        s.shown_query.clear();
                    }
                    None => {}
                }
                if submit {
                    s.editing = false;
                }
            }
            View::HistorySearch(s) => {
                if let Some(id) = id {
                    s.sent = id;
                    s.results.loading = Some(id);
                }
                if submit {
                    s.editing = false;
                }
            }
            _ => {}
        }
    }

    pub(super) fn cycle_filter(&mut self, filter: Filter) {
        let choices: Vec<String> = match (filter, self.stats()) {
            (Filter::Project, Some(stats)) => stats.projects.clone(),
            (Filter::Kind, Some(stats)) => stats.by_type.keys().cloned().collect(),
            (Filter::Scope, _) => vec!["project".into(), "personal".into()],
            _ => Vec::new(),
        };
        let View::Search(s) = self.view_mut() else { return };
        let current = match filter {
            Filter::Project => s.project.clone(),
            Filter::Kind => s.kind.clone(),
            Filter::Scope => s.scope.map(|sc| if sc == Scope::Personal { "personal" } else { "project" }.to_owned()),
        };
        let next = next_choice(&choices, current.as_deref());
        match filter {
            Filter::Project => s.project = next,
            Filter::Kind => s.kind = next,
            Filter::Scope => s.scope = next.map(|v| Scope::parse(&v)),
        }
        self.run_search(false);
    }
}
