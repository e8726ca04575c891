//! The sessions a search looks in: the newest of a project (of all, without one) or the one
//! asked for, listed; and those past the newest, looked up as matches name them ([`Older`]).

use super::requests::SearchRequest;
use super::{View, latest_compaction, view};
use cairn_base::error::Result;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::{HashMap, HashSet};

/// The sessions a search looks in first, newest first; those past them only when these hold
/// too few matches ([`Older`]).
pub(super) const SCOPE_SESSIONS: i64 = 5000;

/// A search's first sessions, newest first (`?1` how many): read from the index alone
/// (`history_sessions_updated_id` and `history_sessions_project_updated_id` hold the id).
pub(super) const SCOPE_OF_ALL: &str = "SELECT id FROM history_sessions ORDER BY updated_at DESC LIMIT ?1";
pub(super) const SCOPE_OF_PROJECT: &str =
    "SELECT id FROM history_sessions WHERE project = ?2 ORDER BY updated_at DESC LIMIT ?1";

/// The sessions searched first: the one asked for, else the newest `limit` of the project's (of
/// all, without a project), newest first.
pub(super) fn search_scope(conn: &Connection, req: &SearchRequest, limit: i64) -> Result<Vec<View>> {
    if let Some(session_id) = req.session_id.as_deref().filter(|s| !s.is_empty()) {
        return Ok(vec![view(conn, session_id, req.caller_session_id.as_deref())?]);
    }
    let ids: Vec<String> = if let Some(project) = req.project.as_deref().filter(|p| !p.is_empty()) {
        let mut stmt = conn.prepare_cached(SCOPE_OF_PROJECT)?;
        stmt.query_map(params![limit, project], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
    } else {
        let mut stmt = conn.prepare_cached(SCOPE_OF_ALL)?;
        stmt.query_map(params![limit], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
    };
    let caller = req.caller_session_id.as_deref();
    ids.into_iter()
        .map(|id| {
            let boundary = if caller == Some(id.as_str()) { latest_compaction(conn, &id)? } else { None };
            Ok(View { session_id: id, boundary })
        })
        .collect()
}

/// The sessions one pass of a search looks in.
pub(super) enum Scope<'s, 'o> {
    /// Listed: the newest of a project (of all), or the one session asked for.
    Listed(&'s [View]),
    /// Those past the newest, looked up as matches name them.
    Older(&'s mut Older<'o>),
}

/// The sessions past the newest a search looks in first, of the project asked for (of all,
/// without one): each looked up when a match names it (one indexed lookup per session, kept),
/// never listed. They take places in the order their matches are found, newest parts first.
pub(super) struct Older<'a> {
    conn: &'a Connection,
    newest: HashSet<&'a str>,
    project: Option<&'a str>,
    caller: Option<&'a str>,
    /// Messages the newest must hold for the older not to be read (a page).
    pub(super) page: usize,
    places: HashMap<String, Option<usize>>,
    views: Vec<View>,
}

impl<'a> Older<'a> {
    pub(super) fn new(conn: &'a Connection, newest: &'a [View], req: &'a SearchRequest, page: usize) -> Older<'a> {
        Older {
            conn,
            newest: newest.iter().map(|v| v.session_id.as_str()).collect(),
            project: req.project.as_deref().filter(|p| !p.is_empty()),
            caller: req.caller_session_id.as_deref(),
            page,
            places: HashMap::new(),
            views: Vec::new(),
        }
    }

    /// The place of a session past the newest, `None` for one among them or of another project.
    pub(super) fn place(&mut self, session_id: &str) -> Result<Option<usize>> {
        if self.newest.contains(session_id) {
            return Ok(None);
        }
        if let Some(&place) = self.places.get(session_id) {
            return Ok(place);
        }
        // One indexed read: whether the session exists, and its project (`None`: none recorded).
        let project: Option<Option<String>> = self
            .conn
            .prepare_cached("SELECT project FROM history_sessions WHERE id = ?1")?
            .query_row([session_id], |r| r.get(0))
            .optional()?;
        let in_scope = project.is_some_and(|p| self.project.is_none_or(|asked| p.as_deref() == Some(asked)));
        let place = if in_scope {
            let own = self.caller == Some(session_id);
            let boundary = if own { latest_compaction(self.conn, session_id)? } else { None };
            self.views.push(View { session_id: session_id.to_owned(), boundary });
            Some(self.views.len() - 1)
        } else {
            None
        };
        self.places.insert(session_id.to_owned(), place);
        Ok(place)
    }

    pub(super) fn view(&self, place: usize) -> &View {
        &self.views[place]
    }
}

/// The sessions of a scope by session id, with their place in the scope's order.
pub(super) fn in_scope_order(views: &[View]) -> HashMap<&str, (usize, &View)> {
    views.iter().enumerate().map(|(i, v)| (v.session_id.as_str(), (i, v))).collect()
}
