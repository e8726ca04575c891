//! The conversation history: sessions → turns → a message → a part in full, and its search.

use std::fmt::Write as _;

use axum::extract::{Path, Query, State};
use cairn_core::history::context_usage::{ContextUsageReport, ContextUsageRequest, ContextUsageTurns};
use cairn_core::history::query::{
    Compactions, CompactionsRequest, MessageRequest, PartRequest, PulledMessage, PulledPart, SearchRequest,
    SearchResults, Section as Part, SessionListing, SessionsRequest, TurnsPage, TurnsRequest,
};
use cairn_core::ops::ContextUsageTurnsRequest;
use serde::Deserialize;

use super::html::{self, Page, Section, esc, table, when};
use super::views::preview;
use super::{UiResult, charts, page, run};
use crate::http::{AppState, given};

/// Characters of a part shown per page.
const PART_PAGE_CHARS: usize = 20_000;

#[derive(Debug, Default, Deserialize)]
pub(super) struct SessionsParams {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    project: Option<String>,
}

pub(super) async fn sessions(State(state): State<AppState>, Query(params): Query<SessionsParams>) -> UiResult {
    let request = SessionsRequest {
        project: given(params.project.clone()),
        query: given(params.q.clone()),
        host: None,
        limit: 100,
        include_children: false,
    };
    let listing: Vec<SessionListing> = run(&state, request).await?;
    let mut p = Page::new("History", Section::History);
    p.heading("Conversation history");
    p.raw(&history_search_form(""));
    p.raw(&table(
        "Sessions, newest first",
        &["Session", "Host", "Project", "Messages", "Updated"],
        listing.iter().map(|s| {
            vec![
                format!(
                    "<a href=\"/ui/history/{}\">{}</a>",
                    html::url(&s.session_id),
                    esc(s.title.as_deref().unwrap_or(&s.session_id))
                ),
                esc(&s.host),
                esc(s.project.as_deref().unwrap_or("")),
                s.messages.to_string(),
                when(&s.updated),
            ]
        }),
    ));
    Ok(page(&p))
}

fn history_search_form(query: &str) -> String {
    format!(
        "<form class=\"filters\" role=\"search\" action=\"/ui/history/search\" method=\"get\">\
         <label for=\"hq\">Search the history</label><input id=\"hq\" type=\"search\" name=\"q\" value=\"{}\">\
         <button type=\"submit\">Search</button></form>",
        esc(query)
    )
}

pub(super) async fn session(State(state): State<AppState>, Path(session_id): Path<String>) -> UiResult {
    let turns: TurnsPage = run(
        &state,
        TurnsRequest {
            session_id: session_id.clone(),
            turn_number: None,
            num_before: 200,
            num_after: 0,
            caller_session_id: None,
        },
    )
    .await?;
    let usage: Option<ContextUsageReport> =
        run(&state, ContextUsageRequest { session_id: Some(session_id.clone()), ..ContextUsageRequest::default() })
            .await
            .ok();
    let compactions: Option<Compactions> =
        run(&state, CompactionsRequest { session_id: session_id.clone(), read: None }).await.ok();
    let over_turns: Option<ContextUsageTurns> =
        run(&state, ContextUsageTurnsRequest::new(session_id.clone())).await.ok();
    let mut p = Page::new(&format!("Session {session_id}"), Section::History);
    p.heading(&format!("Session {session_id}"));
    if let Some(percent) = usage.as_ref().and_then(|u| u.percent) {
        p.raw(&charts::gauge("Context in use now", percent));
    }
    if let Some(u) = over_turns {
        let points: Vec<(i64, u64)> = u.turns.iter().map(|t| (t.turn_number, t.used)).collect();
        p.raw(&charts::context_over_turns(&points, u.limit, &u.compacted_turns));
    }
    if let Some(c) = compactions.filter(|c| !c.compactions.is_empty()) {
        p.raw(&table(
            "Compactions",
            &["#", "When", "Summary"],
            c.compactions.iter().map(|e| vec![e.index.to_string(), when(&e.time), esc(&e.preview)]),
        ));
    }
    let sid = html::url(&session_id);
    p.raw(&table(
        "Turns",
        &["Turn", "User", "Assistant"],
        turns.turns.iter().map(|t| {
            let user = format!(
                "<a href=\"/ui/history/{sid}/{}\">{}</a>",
                html::url(&t.user.message_id),
                esc(&preview(t.user.preview.as_deref().unwrap_or("(no text)"), 240))
            );
            let mut assistant = esc(&preview(t.assistant.preview.as_deref().unwrap_or(""), 240));
            let _ = write!(assistant, " <span class=\"muted\">({} messages)</span>", t.assistant.total_messages);
            vec![t.turn_number.to_string(), user, assistant]
        }),
    ));
    Ok(page(&p))
}

pub(super) async fn message(
    State(state): State<AppState>,
    Path((session_id, message_id)): Path<(String, String)>,
) -> UiResult {
    let pulled: PulledMessage = run(
        &state,
        MessageRequest { session_id: session_id.clone(), message_id: message_id.clone(), caller_session_id: None },
    )
    .await?;
    let mut p = Page::new(&format!("Message {message_id}"), Section::History);
    p.heading(&format!("{} message, turn {}", pulled.role, pulled.turn_number));
    p.raw(&format!(
        "<p class=\"meta\">{} · <a href=\"/ui/history/{}\">back to the session</a></p>",
        when(&pulled.time),
        html::url(&session_id)
    ));
    let part_link = |part_id: &Option<String>| {
        part_id
            .as_ref()
            .map(|id| {
                format!(
                    " <a href=\"/ui/history/{}/{}/{}\">the part in full</a>",
                    html::url(&session_id),
                    html::url(&message_id),
                    html::url(id)
                )
            })
            .unwrap_or_default()
    };
    for section in &pulled.sections {
        let html = match section {
            Part::Text { content, part_id, injected } => format!(
                "<section class=\"part\"><h2>Text{}{}</h2><pre>{}</pre></section>",
                if *injected { " (injected by cairn)" } else { "" },
                part_link(part_id),
                esc(content)
            ),
            Part::Reasoning { content, part_id } => format!(
                "<section class=\"part\"><h2>Reasoning{}</h2><pre>{}</pre></section>",
                part_link(part_id),
                esc(content)
            ),
            Part::Tool { tool, status, input, content, part_id } => format!(
                "<section class=\"part\"><h2>Tool {} ({}){}</h2><pre>{}</pre><pre>{}</pre></section>",
                esc(tool),
                esc(status),
                part_link(part_id),
                esc(&input.as_ref().map(std::string::ToString::to_string).unwrap_or_default()),
                esc(content.as_deref().unwrap_or(""))
            ),
            Part::Image { mime } => {
                format!("<p class=\"muted\">An image ({})</p>", esc(mime.as_deref().unwrap_or("?")))
            }
            Part::File { path, mime } => format!(
                "<p class=\"muted\">A file {} ({})</p>",
                esc(path.as_deref().unwrap_or("")),
                esc(mime.as_deref().unwrap_or("?"))
            ),
        };
        p.raw(&html);
    }
    Ok(page(&p))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct PartParams {
    #[serde(default)]
    offset: Option<usize>,
}

pub(super) async fn part(
    State(state): State<AppState>,
    Path((session_id, message_id, part_id)): Path<(String, String, String)>,
    Query(params): Query<PartParams>,
) -> UiResult {
    let pulled: PulledPart = run(
        &state,
        PartRequest {
            session_id: session_id.clone(),
            message_id: message_id.clone(),
            part_id: part_id.clone(),
            offset: params.offset.unwrap_or(0),
            max_chars: PART_PAGE_CHARS,
            caller_session_id: None,
        },
    )
    .await?;
    let mut p = Page::new(&format!("Part {part_id}"), Section::History);
    p.heading(&format!("A {} part", pulled.kind));
    let back = format!("/ui/history/{}/{}", html::url(&session_id), html::url(&message_id));
    p.raw(&format!(
        "<p class=\"meta\">characters {}–{} of {} · <a href=\"{back}\">back to the message</a></p>",
        pulled.offset,
        pulled.offset + pulled.content.chars().count() as u64,
        pulled.total_chars
    ));
    p.raw(&format!("<pre>{}</pre>", esc(&pulled.content)));
    if let Some(next) = pulled.next_offset {
        p.raw(&format!(
            "<p><a href=\"/ui/history/{}/{}/{}?offset={next}\">Next page</a></p>",
            html::url(&session_id),
            html::url(&message_id),
            html::url(&part_id)
        ));
    }
    Ok(page(&p))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct SearchParams {
    #[serde(default)]
    q: Option<String>,
}

pub(super) async fn search(State(state): State<AppState>, Query(params): Query<SearchParams>) -> UiResult {
    let query = params.q.unwrap_or_default();
    let mut p = Page::new("History search", Section::History);
    p.heading("Search the conversation history");
    p.raw(&history_search_form(&query));
    if query.trim().is_empty() {
        return Ok(page(&p));
    }
    let request = SearchRequest {
        query: query.clone(),
        session_id: None,
        project: None,
        literal: false,
        kinds: None,
        caller_session_id: None,
    };
    let found: SearchResults = run(&state, request).await?;
    if found.messages.is_empty() {
        p.raw("<p class=\"muted\">Nothing matches.</p>");
    }
    p.raw("<ol class=\"results\">");
    for m in &found.messages {
        let mut snippets = String::new();
        for hit in &m.hits {
            for s in &hit.snippets {
                let _ = write!(snippets, "<p class=\"snippet\">{}</p>", html::snippet(s));
            }
        }
        p.raw(&format!(
            "<li><h2><a href=\"/ui/history/{}/{}\">{} message, turn {}</a></h2><p class=\"meta\">session <a href=\"/ui/history/{}\"><code>{}</code></a></p>{snippets}</li>",
            html::url(&m.session_id),
            html::url(&m.message_id),
            esc(&m.role),
            m.turn_number,
            html::url(&m.session_id),
            esc(&m.session_id)
        ));
    }
    p.raw("</ol>");
    Ok(page(&p))
}
