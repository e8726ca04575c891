//! The live stream (`GET /ui/live`, Server-Sent Events): new memories, prompts and sessions as
//! they land.
//!
//! It polls the newest rows every [`POLL`] rather than listening to the engine's writer: a
//! poll sees every writer the same way (the daemon's own requests, the spool drained from
//! hooks, another process writing the file, an import), costs three indexed reads of the newest
//! rows per open page, and needs nothing on the write path, whose latency every agent pays.
//! 250 ms keeps "saved from the CLI, seen on the page" well within a second.

use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use cairn_core::memory::ListFilter;
use cairn_core::ops::{RecentPromptsRequest, RecentSessionsRequest};
use futures_util::Stream;
use serde_json::json;

use super::views::preview;
use crate::http::AppState;

/// How often the stream looks for new rows.
const POLL: Duration = Duration::from_millis(250);
/// Rows read per kind and poll: more than this many new ones in 250 ms shows only the newest.
const NEWEST: usize = 20;

/// What the stream has already announced.
#[derive(Default)]
struct Seen {
    memory: i64,
    prompt: i64,
    sessions: HashSet<String>,
}

pub(super) async fn stream(State(state): State<AppState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let shutdown = state.config.shutdown.clone();
    // The first poll only learns what exists: the page already shows it.
    let (seen, _) = poll(&state, Seen::default(), false).await;
    let mut first = Some(Event::default().event("ready").data("{}"));
    let stream = futures_util::stream::unfold((state, seen), move |(state, seen)| {
        let shutdown = shutdown.clone();
        let ready = first.take();
        async move {
            if let Some(ready) = ready {
                return Some((vec![ready], (state, seen)));
            }
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(POLL) => {},
            }
            let (seen, events) = poll(&state, seen, true).await;
            Some((events, (state, seen)))
        }
    });
    let events = futures_util::StreamExt::flat_map(stream, |events| {
        futures_util::stream::iter(events.into_iter().map(Ok::<Event, Infallible>))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// Read the newest rows; answer what is new since `seen` when `announce`.
async fn poll(state: &AppState, mut seen: Seen, announce: bool) -> (Seen, Vec<Event>) {
    let first = !announce;
    let mut events = Vec::new();
    let newest = ListFilter { limit: NEWEST, ..ListFilter::default() };
    if let Ok(memories) = super::run(state, newest).await {
        let since = seen.memory;
        for m in memories.iter().rev().filter(|m| m.id > since) {
            if !first {
                events.push(event(
                    "memory",
                    json!({"id": m.id, "title": m.title, "type": m.kind, "project": m.project,
                           "url": format!("/ui/memory/{}", m.id), "at": m.created_at}),
                ));
            }
            seen.memory = seen.memory.max(m.id);
        }
    }
    if let Ok(prompts) = super::run(state, RecentPromptsRequest { project: None, limit: NEWEST }).await {
        let since = seen.prompt;
        for p in prompts.iter().rev().filter(|p| p.id > since) {
            if !first {
                events.push(event(
                    "prompt",
                    json!({"id": p.id, "title": preview(&p.content, 160), "project": p.project, "at": p.created_at}),
                ));
            }
            seen.prompt = seen.prompt.max(p.id);
        }
    }
    let sessions = RecentSessionsRequest { project: None, limit: NEWEST, include_children: true };
    if let Ok(sessions) = super::run(state, sessions).await {
        for s in sessions.iter().rev() {
            if seen.sessions.insert(s.session.id.clone()) && !first {
                events.push(event(
                    "session",
                    json!({"id": s.session.id, "title": s.session.id, "project": s.session.project,
                           "url": format!("/ui/history/{}", super::html::url(&s.session.id)), "at": s.session.started_at}),
                ));
            }
        }
    }
    (seen, events)
}

fn event(kind: &str, data: serde_json::Value) -> Event {
    Event::default().event(kind).data(data.to_string())
}
