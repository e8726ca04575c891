//! `history_search`: ranked candidates (FTS, trigram, literal), grouped into hits with
//! snippets.

use super::pull::tool_shown;
use super::requests::SearchRequest;
use super::results::{SearchHitPart, SearchMessage, SearchResults};
use super::scope::{Older, SCOPE_SESSIONS, Scope, in_scope_order, search_scope};
use super::{DEFAULT_INPUT_TOOLS, DEFAULT_OUTPUT_TOOLS, MAX_QUERY_CHARS, MessageRow, View};
use crate::indexed::indexed_kind;
use crate::model::PartKind;
use crate::model::parse_kind;
use crate::store::HistoryDb;
use cairn_base::error::{CairnError, Result};
use cairn_base::query::{self, Term};
use cairn_base::settings::HistorySettings;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::{HashMap, HashSet};

/// Candidates one search ranks per hit it may show (`search.message_limit` ×
/// `search.max_hits_per_message`), within [`MIN_RANKED`, `MAX_RANKED`].
pub(super) const RANKED_PER_HIT: usize = 4;
pub(super) const MIN_RANKED: usize = 100;
pub(super) const MAX_RANKED: usize = 2_000;
/// Parts (by rowid, newest first) the first ranking looks at; each retry looks at 8× more.
pub(super) const FIRST_WINDOW: i64 = 20_000;

/// A part that matched, with what ranks it. Only what grouping needs: the text of a part is
/// read for the hits shown, not for every candidate.
pub(super) struct Candidate {
    session_id: String,
    message: MessageRow,
    part: HitPart,
    rank: f64,
}

pub(super) struct HitPart {
    rowid: i64,
    id: String,
    kind: PartKind,
    tool: Option<String>,
}

/// Parts matching the query, grouped by message, best first.
///
/// The newest 5,000 sessions (`SCOPE_SESSIONS`) are searched first. When they hold fewer matching
/// messages than a page shows, the older sessions' hits follow: a session older than the newest
/// 5,000 (a year of a heavy user's) is still found by a word only it holds. The older sessions
/// are never listed (~60,000 ids at 10M parts, 11 ms to read): each is looked up when a match
/// names it (`Older`). A scan of every part (the explicit literal search) stays within the
/// newest.
pub fn search(db: &HistoryDb, req: &SearchRequest, cfg: &HistorySettings) -> Result<SearchResults> {
    search_in_pages_of(db, req, cfg, SCOPE_SESSIONS)
}

pub(super) fn search_in_pages_of(
    db: &HistoryDb,
    req: &SearchRequest,
    cfg: &HistorySettings,
    scope_sessions: i64,
) -> Result<SearchResults> {
    let text = req.query.trim();
    if text.is_empty() {
        return Err(CairnError::empty("query"));
    }
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(CairnError::invalid(format!("query is longer than {MAX_QUERY_CHARS} characters")));
    }
    let query = Query { text, path: Path::of(text, req.literal), kinds: parse_kinds(req.kinds.as_deref())? };
    let newest = search_scope(db.conn(), req, scope_sessions)?;
    let page = cfg.search.message_limit;
    let one_session = req.session_id.as_deref().is_some_and(|s| !s.is_empty());
    let past_newest = newest.len() as i64 == scope_sessions && !one_session && query.path != Path::Scan;
    let mut older = past_newest.then(|| Older::new(db.conn(), &newest, req, page));
    match query.path {
        // The trigram walk reads matches newest first until the newest sessions hold enough, so
        // it gathers the older sessions' matches on its way: one walk, not two.
        Path::Trigram => search_views(db, &query, cfg, &newest, older.as_mut()),
        Path::Scan => search_views(db, &query, cfg, &newest, None),
        Path::Ranked => {
            let mut found = search_views(db, &query, cfg, &newest, None)?;
            if let Some(older) = older.as_mut().filter(|_| found.messages.len() < page) {
                let more = search_older(db, &query, cfg, older)?;
                found.messages.extend(more.messages.into_iter().take(page - found.messages.len()));
            }
            Ok(found)
        }
    }
}

/// A query checked once for every pass of a search.
struct Query<'q> {
    text: &'q str,
    path: Path,
    kinds: Vec<&'static str>,
}

impl Query<'_> {
    /// The words a snippet is placed around: the query's words when ranked, else the substring.
    fn needles(&self) -> Vec<String> {
        if self.path == Path::Ranked { needles_of(&query::parse(self.text)) } else { vec![self.text.to_lowercase()] }
    }
}

/// How a query finds its candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// FTS5's BM25 over the words.
    Ranked,
    /// The trigram index, for a substring of Chinese or Japanese.
    Trigram,
    /// Every part of the scope read (the literal search, and what no index can look up).
    Scan,
}

impl Path {
    fn of(text: &str, literal: bool) -> Path {
        // The index's tokenizer (unicode61) keeps a run of Chinese or Japanese characters as
        // one word, so a word inside a sentence is never found by it: such queries are
        // substrings, looked up in the trigram index (3 characters or more; shorter ones scan
        // the parts). FTS5's query syntax ends a string at a NUL ("unterminated string"): such
        // a Chinese or Japanese query scans.
        let unsegmented = crate::text::has_unsegmented_script(text);
        let indexable = text.chars().count() >= 3 && !text.contains('\0');
        if unsegmented && !literal && indexable {
            Path::Trigram
        } else if literal || unsegmented {
            Path::Scan
        } else {
            Path::Ranked
        }
    }
}

/// [`search`] within the sessions of `views`; a trigram walk also gathers the matches of the
/// sessions past them (`older`), after their own.
fn search_views(
    db: &HistoryDb,
    query: &Query,
    cfg: &HistorySettings,
    views: &[View],
    older: Option<&mut Older>,
) -> Result<SearchResults> {
    let (conn, text, kinds) = (db.conn(), query.text, &query.kinds);
    let candidates = match query.path {
        Path::Trigram => trigram_candidates(conn, db.fts(), views, kinds, text, older)?,
        Path::Scan => literal_candidates(conn, views, kinds, text)?,
        Path::Ranked => ranked_candidates(conn, db.fts(), Scope::Listed(views), kinds, text, ranked_count(cfg))?,
    };
    group_hits(conn, candidates, &query.needles(), cfg)
}

/// A ranked search's second pass: the sessions past the newest.
fn search_older(db: &HistoryDb, query: &Query, cfg: &HistorySettings, older: &mut Older) -> Result<SearchResults> {
    let candidates =
        ranked_candidates(db.conn(), db.fts(), Scope::Older(older), &query.kinds, query.text, ranked_count(cfg))?;
    group_hits(db.conn(), candidates, &query.needles(), cfg)
}

/// Candidates a ranked search takes from FTS5, for the hits a page can show.
fn ranked_count(cfg: &HistorySettings) -> usize {
    let shown = cfg.search.message_limit.saturating_mul(cfg.search.max_hits_per_message);
    shown.saturating_mul(RANKED_PER_HIT).clamp(MIN_RANKED, MAX_RANKED)
}

pub(super) fn parse_kinds(raw: Option<&str>) -> Result<Vec<&'static str>> {
    let raw = raw.filter(|r| !r.trim().is_empty()).unwrap_or("text|tool");
    let mut kinds = Vec::new();
    for name in raw.split(['|', ',']).map(str::trim).filter(|n| !n.is_empty()) {
        let kind = ["text", "tool", "reasoning"].into_iter().find(|k| *k == name).ok_or_else(|| {
            CairnError::invalid(format!("unknown type {name:?}"))
                .with_hint("type is a |-separated subset of text|tool|reasoning")
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    // only separators ("| |"): the default, not an empty filter
    if kinds.is_empty() {
        kinds = vec!["text", "tool"];
    }
    Ok(kinds)
}

/// FTS5 BM25 over the parts, filtered inside the index by session (for one session); the type
/// is checked on the ranked rows, not in the index.
///
/// Two costs of FTS5's ranking are kept bounded:
/// - BM25 counts, at each query, the rows holding each phrase: a word in most rows costs a walk
///   over most of the index. Such a word adds little or nothing to BM25 (FTS5 floors the IDF of
///   a word in half the rows or more at 1e-6), so a word found in half of the parts sampled
///   (the newest [`SAMPLE_WINDOW`], and older slices for a word they hold rarely), or estimated
///   in more than [`COMMON_ROWS`] parts, is left out of the ranking ([`split_common`]). Rows that match only
///   such words come after the ranked ones, newest first (a query of common words only: its
///   newest matches).
/// - FTS5 ranks every row that matches before it sorts, about a microsecond each: the ranking
///   starts with the newest parts (a rowid range, which FTS5 applies in the index), the newest
///   [`FIRST_WINDOW`] parts of the scope, then 8× as many, until enough candidates are found or
///   the whole scope was ranked. A query of rare words ranks every match (few rows, cheap;
///   [`next_window`]).
pub(super) fn ranked_candidates(
    conn: &Connection,
    fts: &Connection,
    scope: Scope,
    kinds: &[&str],
    text: &str,
    ranked: usize,
) -> Result<Vec<Candidate>> {
    let terms = query::parse(text);
    // Only symbols or stop characters: nothing to rank by, so nothing found (the memory
    // search answers the same); `literal` finds punctuation.
    let Some(all_words) = query::to_fts(&terms) else {
        return Ok(Vec::new());
    };
    let one = match &scope {
        Scope::Listed([one]) => Some(one),
        _ => None,
    };
    let session_filter = match one {
        Some(one) => format!(" AND {{session}} : \"{}\"", one.session_id.replace('"', "")),
        None => String::new(),
    };
    // Two statements: each is one step down the table's b-tree, where both in one scan it.
    let all: (Option<i64>, Option<i64>) = (
        conn.prepare_cached("SELECT min(rowid) FROM history_parts")?.query_row([], |r| r.get(0))?,
        conn.prepare_cached("SELECT max(rowid) FROM history_parts")?.query_row([], |r| r.get(0))?,
    );
    let (Some(first), Some(last)) = all else { return Ok(Vec::new()) };
    let (oldest, newest) = match one {
        Some(one) => {
            let span: (Option<i64>, Option<i64>) = conn
                .prepare_cached("SELECT min(rowid), max(rowid) FROM history_parts WHERE session_id = ?1")?
                .query_row([&one.session_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let (Some(oldest), Some(newest)) = span else { return Ok(Vec::new()) };
            (oldest, newest)
        }
        None => (first, last),
    };
    let one_session = one.is_some();
    let mut found = Found {
        conn,
        scope: match scope {
            Scope::Listed(views) => Lookup::Listed(views.iter().map(|v| (v.session_id.as_str(), v)).collect()),
            Scope::Older(older) => Lookup::Older(older),
        },
        kinds,
        seen: HashSet::new(),
        candidates: Vec::new(),
    };
    let Split { rare, common, rare_rows } = split_common(fts, terms, first, last)?;
    if let Some(words) = query::to_fts(&rare) {
        let expression = format!("{{body}} : ({words}){session_filter}");
        let mut window = FIRST_WINDOW;
        loop {
            let from = newest.saturating_sub(window);
            let mut stmt = fts.prepare_cached(
                "SELECT rowid, rank FROM history_fts WHERE history_fts MATCH ?1 AND rowid > ?2 ORDER BY rank LIMIT ?3",
            )?;
            let hits: Vec<(i64, f64)> = stmt
                .query_map(params![expression, from, ranked as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            // A row ranks the same in every window (BM25's statistics are the whole index's):
            // the rows of a smaller window are kept, not hydrated again.
            found.add(&hits)?;
            // Enough left after the type, scope and visibility (half the ranked), or nothing
            // more to rank.
            if from < oldest || found.candidates.len() >= ranked / 2 {
                break;
            }
            // Across sessions the newest parts may be unlike the rest (an import of another
            // host's sessions): what the sample of the whole archive estimates counts too.
            let estimated = if one_session { 0 } else { rare_rows };
            window = next_window(hits.len(), window, newest - oldest, estimated);
        }
    }
    if !common.is_empty() && found.candidates.len() < ranked / 2 {
        let expression = format!("{{body}} : ({all_words}){session_filter}");
        let mut stmt = fts.prepare_cached(
            "SELECT rowid, 0.0 FROM history_fts WHERE history_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2",
        )?;
        let hits: Vec<(i64, f64)> = stmt
            .query_map(params![expression, ranked as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        found.add(&hits)?;
    }
    let mut candidates = found.candidates;
    // Best first (FTS5's rank is negative; the unranked have 0); ties broken by time, newest first.
    candidates.sort_by(|a, b| a.rank.total_cmp(&b.rank).then_with(|| b.message.created_at.cmp(&a.message.created_at)));
    Ok(candidates)
}

/// The window after one that found too few: the whole scope at once when its matches should
/// be no more than a few thousand ([`FULL_RANK_ROWS`]; few matches so far, rare words), else 8×
/// as wide. `estimated` is what the archive's sample says the words match (0 if unknown): a
/// window of the newest parts that found nothing is no evidence of rare words when those parts
/// are unlike the rest.
pub(super) fn next_window(hits: usize, window: i64, span: i64, estimated: i64) -> i64 {
    let extrapolated = (hits as i64).max(1).saturating_mul(span / window.max(1) + 1);
    if extrapolated.max(estimated) <= FULL_RANK_ROWS { i64::MAX } else { window.saturating_mul(8) }
}

/// Matches FTS5 ranks in one go (about a microsecond each) when widening the window.
pub(super) const FULL_RANK_ROWS: i64 = 5_000;
/// A word estimated in more rows than this is not ranked by BM25 (counting its rows at every
/// query would cost about 0.1 µs each).
pub(super) const COMMON_ROWS: i64 = 50_000;
/// Parts (the newest rowids) in which [`split_common`] counts a word first.
pub(super) const SAMPLE_WINDOW: i64 = 2_000;
/// Then, for a word the newest parts hold rarely, slices of older rowids spread over the
/// archive, [`SAMPLE_WINDOW`] / 4 each.
pub(super) const OLDER_SLICES: i64 = 3;

/// The query's terms split by how often the archive holds them.
pub(super) struct Split {
    /// The terms that rank.
    pub(super) rare: Vec<Term>,
    /// The common ones: in half the parts or more (BM25 gives them no weight), or estimated in
    /// more than [`COMMON_ROWS`] parts (the costly ones to count).
    pub(super) common: Vec<Term>,
    /// The parts the rare terms are estimated in, together (0 when nothing was sampled).
    pub(super) rare_rows: i64,
}

/// Splits the query's terms into those that rank and the common ones. A word is counted in the
/// newest [`SAMPLE_WINDOW`] parts; one they hold rarely is counted again in [`OLDER_SLICES`]
/// slices of older rowids spread over the archive, and is common if either count says so. The
/// newest parts alone misled when they were unlike the rest: after an import of 100k Chinese
/// parts into an archive of 10M English ones, every English word looked rare and was ranked over
/// millions of rows (seconds a search). Nothing is left out of a small archive. `first` and
/// `last` are the archive's lowest and highest part rowids (a sample counts rowids, not rows:
/// parts of a forgotten session only make a word look rarer).
pub(super) fn split_common(conn: &Connection, terms: Vec<Term>, first: i64, last: i64) -> Result<Split> {
    let mut split = Split { rare: Vec::new(), common: Vec::new(), rare_rows: 0 };
    if last - first < SAMPLE_WINDOW {
        split.rare = terms;
        return Ok(split);
    }
    let rows = last - first + 1;
    // In half the rows (BM25 weighs it 0), or in more rows than one query should walk.
    let common = |estimated: i64| estimated >= (rows / 2).min(COMMON_ROWS);
    for term in terms {
        let Some(words) = query::to_fts(std::slice::from_ref(&term)) else { continue };
        let expression = format!("{{body}} : ({words})");
        let mut estimated =
            matches_in(conn, &expression, last - SAMPLE_WINDOW + 1, SAMPLE_WINDOW)? * rows / SAMPLE_WINDOW;
        if !common(estimated) {
            estimated = estimated.max((older_sample(conn, &expression, first, last)? * rows as f64) as i64);
        }
        if common(estimated) {
            split.common.push(term);
        } else {
            split.rare.push(term);
            split.rare_rows = split.rare_rows.saturating_add(estimated);
        }
    }
    Ok(split)
}

/// The share of rows matching `expression` (rows per rowid) in [`OLDER_SLICES`] slices of
/// rowids evenly spread from `first` to just before the newest [`SAMPLE_WINDOW`].
fn older_sample(conn: &Connection, expression: &str, first: i64, last: i64) -> Result<f64> {
    let slice = SAMPLE_WINDOW / 4;
    let older_end = last - SAMPLE_WINDOW; // the last rowid before the newest window
    let mut matched = 0;
    for k in 0..OLDER_SLICES {
        let start = first + (older_end - first + 1 - slice).max(0) * k / (OLDER_SLICES - 1).max(1);
        matched += matches_in(conn, expression, start, slice)?;
    }
    Ok(matched as f64 / (slice * OLDER_SLICES) as f64)
}

/// Rows matching `expression` among `len` rowids from `start`.
fn matches_in(conn: &Connection, expression: &str, start: i64, len: i64) -> Result<i64> {
    let mut stmt = conn
        .prepare_cached("SELECT count(*) FROM history_fts WHERE history_fts MATCH ?1 AND rowid >= ?2 AND rowid < ?3")?;
    Ok(stmt.query_row(params![expression, start, start.saturating_add(len)], |r| r.get(0))?)
}

/// The candidates of one search as they are found: hydrated, checked against the type, the
/// scope and the visibility, each part once.
pub(super) struct Found<'a, 'o> {
    conn: &'a Connection,
    scope: Lookup<'a, 'o>,
    kinds: &'a [&'a str],
    seen: HashSet<i64>,
    candidates: Vec<Candidate>,
}

/// How a pass of the ranked search tells a session in its scope, and what of it is seen.
enum Lookup<'a, 'o> {
    Listed(HashMap<&'a str, &'a View>),
    Older(&'a mut Older<'o>),
}

impl Lookup<'_, '_> {
    /// Whether the session is in the scope and shows this message.
    fn shows(&mut self, session_id: &str, message: &MessageRow) -> Result<bool> {
        Ok(match self {
            Lookup::Listed(views) => views.get(session_id).is_some_and(|view| view.shows(message)),
            Lookup::Older(older) => older.place(session_id)?.is_some_and(|place| older.view(place).shows(message)),
        })
    }
}

impl Found<'_, '_> {
    fn add(&mut self, hits: &[(i64, f64)]) -> Result<()> {
        for &(rowid, rank) in hits {
            if !self.seen.insert(rowid) {
                continue;
            }
            let Some((session_id, message, part)) = hydrate(self.conn, rowid)? else { continue };
            let kind_ok = indexed_kind(part.kind).is_some_and(|k| self.kinds.contains(&k));
            if kind_ok && self.scope.shows(&session_id, &message)? {
                self.candidates.push(Candidate { session_id, message, part, rank });
            }
        }
        Ok(())
    }
}

/// The message and the kind of a matching part (not its text).
pub(super) fn hydrate(conn: &Connection, rowid: i64) -> Result<Option<(String, MessageRow, HitPart)>> {
    Ok(conn
        .prepare_cached(
            "SELECT p.session_id, m.id, m.role, m.seq, coalesce(m.turn_number, 0), m.summary, m.compaction,
                 m.synthetic, m.created_at, p.id, p.kind, p.tool
             FROM history_parts p JOIN history_messages m ON m.session_id = p.session_id AND m.id = p.message_id
             WHERE p.rowid = ?1",
        )?
        .query_row([rowid], |r| {
            let message = message_row(r, 1)?;
            let part = HitPart { rowid, id: r.get(9)?, kind: parse_kind(&r.get::<_, String>(10)?), tool: r.get(11)? };
            Ok((r.get(0)?, message, part))
        })
        .optional()?)
}

/// Parts looked at per trigram lookup, newest first, until [`LITERAL_CANDIDATES`] are found.
pub(super) const TRIGRAM_PAGE: usize = 2_000;
/// Candidates a substring search gathers (as the scan does).
pub(super) const LITERAL_CANDIDATES: usize = 300;

/// A substring in Chinese or Japanese (3 characters or more), through the trigram index: only
/// the parts that hold such characters are in it (what the word index holds of each, see
/// [`crate::indexed::indexed_body`]; `literal` scans whole parts). Newest parts first; for one
/// session, within its rowids.
///
/// What it answers: the matching parts of the newest pages of [`TRIGRAM_PAGE`] index rows,
/// until [`LITERAL_CANDIDATES`] pass the scope, the type, the visibility and have a message,
/// sorted as the scan sorts (sessions as the scope lists them, newest messages first, parts in
/// order), the first [`LITERAL_CANDIDATES`].
///
/// Its cost is reading rows past the archive's memory map (10M parts: each page a `pread`), so
/// a page's rows are read in one statement (`json_each`) for what the scope and the type need,
/// the part alone; messages are read only for the rows that can make the cut (the sessions
/// first in the scope's order that hold [`LITERAL_CANDIDATES`] rows: every row of a later
/// session sorts after all of theirs), in one statement more. A part whose message is missing
/// does not count: it leaves the cut, and the cut is taken again ([`Matches::settle`]).
pub(super) fn trigram_candidates(
    conn: &Connection,
    fts: &Connection,
    views: &[View],
    kinds: &[&str],
    text: &str,
    mut older: Option<&mut Older>,
) -> Result<Vec<Candidate>> {
    let by_session = in_scope_order(views);
    // A walk that gathers the older sessions' matches too spans every rowid, whatever the scope.
    let span = if older.is_some() { Some((i64::MIN, i64::MAX)) } else { trigram_span(conn, views)? };
    let Some((oldest, below)) = span else { return Ok(Vec::new()) };
    let phrase = trigram_phrase(text);
    let mut found = Matches::default();
    // The older sessions' rows met on the way, as a walk of their own would take them: the
    // first [`LITERAL_CANDIDATES`] (whole pages), newest first.
    let mut past = Matches::default();
    // One statement, read a page at a time: FTS5 merges the phrase's doclists once, not again
    // for every page.
    let mut lookup = fts.prepare_cached(
        "SELECT rowid FROM history_cjk WHERE history_cjk MATCH ?1 AND rowid >= ?2 AND rowid < ?3
         ORDER BY rowid DESC",
    )?;
    let mut matches = lookup.query(params![phrase, oldest, below])?;
    loop {
        let rowids = next_page(&mut matches)?;
        let full_page = rowids.len() == TRIGRAM_PAGE;
        // Once the older sessions have their rows, no more of them are looked up.
        let gathering = older.as_deref_mut().filter(|_| past.rows.len() < LITERAL_CANDIDATES);
        let (own, older_rows) = in_scope(conn, &rowids, &by_session, gathering, kinds)?;
        found.add_page(conn, own)?;
        past.add_page(conn, older_rows)?;
        let enough = |found: &Matches| !full_page || found.rows.len() >= LITERAL_CANDIDATES;
        // Enough rows, or the last page: the cut's messages, which may drop rows (then read on).
        if enough(&found) {
            found.settle(conn)?;
            if enough(&found) {
                break;
            }
        }
    }
    let mut candidates = found.into_candidates();
    // The older sessions' hits follow, only when the newest hold fewer messages than a page
    // (counted before grouping leaves out the tools a search skips).
    if older.is_some_and(|older| messages_in(&candidates) < older.page) {
        past.settle(conn)?;
        candidates.extend(past.into_candidates());
    }
    Ok(candidates)
}

/// How many messages these candidates hold.
fn messages_in(candidates: &[Candidate]) -> usize {
    candidates.iter().map(|c| (c.session_id.as_str(), c.message.id.as_str())).collect::<HashSet<_>>().len()
}

/// The next [`TRIGRAM_PAGE`] matches (fewer at the end).
fn next_page(matches: &mut rusqlite::Rows<'_>) -> Result<Vec<i64>> {
    let mut rowids = Vec::with_capacity(TRIGRAM_PAGE);
    while rowids.len() < TRIGRAM_PAGE {
        let Some(row) = matches.next()? else { break };
        rowids.push(row.get(0)?);
    }
    Ok(rowids)
}

/// The rows of a page of a type asked for (their messages not read yet): those in the scope,
/// and those of the sessions past it (`older`, when a search looks there too).
fn in_scope(
    conn: &Connection,
    rowids: &[i64],
    by_session: &HashMap<&str, (usize, &View)>,
    mut older: Option<&mut Older>,
    kinds: &[&str],
) -> Result<(Vec<Row>, Vec<Row>)> {
    let (mut own, mut past) = (Vec::new(), Vec::new());
    for (session_id, part, message_id) in parts_of(conn, rowids)? {
        if !indexed_kind(part.kind).is_some_and(|k| kinds.contains(&k)) {
            continue;
        }
        let placed = match (by_session.get(session_id.as_str()), older.as_deref_mut()) {
            (Some(&(order, view)), _) => Some((order, view.boundary.clone(), &mut own)),
            (None, Some(older)) => older.place(&session_id)?.map(|p| (p, older.view(p).boundary.clone(), &mut past)),
            (None, None) => None,
        };
        let Some((order, boundary, into)) = placed else { continue };
        into.push(Row { order, view: View { session_id, boundary }, part, message_id, message: None });
    }
    Ok((own, past))
}

/// A part the trigram index matched, in the scope and of a type asked for.
struct Row {
    /// The session's place in the scope's order.
    order: usize,
    /// The session, and what of it the caller sees.
    view: View,
    part: HitPart,
    message_id: String,
    /// Read once the row may make the cut (or at once in the caller's compacted session).
    message: Option<MessageRow>,
}

/// The rows found so far: every one has its message or was never looked at; those whose
/// message is missing or hidden are gone.
#[derive(Default)]
struct Matches {
    rows: Vec<Row>,
}

impl Matches {
    /// A page's rows. Only the caller's own session (after a compaction) hides messages: its
    /// rows need their message to count, so it is read now.
    fn add_page(&mut self, conn: &Connection, mut page: Vec<Row>) -> Result<()> {
        let bounded: Vec<usize> = (0..page.len()).filter(|&i| page[i].view.boundary.is_some()).collect();
        let messages = messages_of(conn, bounded.iter().map(|&i| &page[i]))?;
        for (&i, message) in bounded.iter().zip(messages) {
            let row = &mut page[i];
            row.message = message.filter(|m| row.view.shows(m));
        }
        let visible = page.into_iter().filter(|row| row.view.boundary.is_none() || row.message.is_some());
        self.rows.extend(visible);
        Ok(())
    }

    /// Keeps the rows of the sessions first in the scope's order that hold the first
    /// [`LITERAL_CANDIDATES`], each with its message; a row whose message is missing leaves,
    /// and the cut is taken again, until every row kept has its message.
    fn settle(&mut self, conn: &Connection) -> Result<()> {
        // Stable: within a session, the page order (the order of rows read).
        self.rows.sort_by_key(|row| row.order);
        loop {
            let cut = self.cut();
            let unread: Vec<usize> = (0..cut).filter(|&i| self.rows[i].message.is_none()).collect();
            if unread.is_empty() {
                self.rows.truncate(cut);
                return Ok(());
            }
            let messages = messages_of(conn, unread.iter().map(|&i| &self.rows[i]))?;
            for (&i, message) in unread.iter().zip(messages) {
                self.rows[i].message = message;
            }
            // Every row of the cut has been looked up now: one still without a message has none.
            let mut index = 0;
            self.rows.retain(|row| {
                let keep = index >= cut || row.message.is_some();
                index += 1;
                keep
            });
        }
    }

    /// The rows as candidates, the first [`LITERAL_CANDIDATES`] in the scan's order (after
    /// [`Matches::settle`], every row has its message).
    fn into_candidates(self) -> Vec<Candidate> {
        let candidates = self.rows.into_iter().filter_map(|row| {
            let message = row.message?;
            Some((row.order, Candidate { session_id: row.view.session_id, message, part: row.part, rank: 0.0 }))
        });
        first_in_scan_order(candidates.collect())
    }

    /// How many rows (sorted by scope order) the sessions holding the first
    /// [`LITERAL_CANDIDATES`] take.
    fn cut(&self) -> usize {
        if self.rows.len() <= LITERAL_CANDIDATES {
            return self.rows.len();
        }
        let last_order = self.rows[LITERAL_CANDIDATES - 1].order;
        self.rows.partition_point(|row| row.order <= last_order)
    }
}

/// The first [`LITERAL_CANDIDATES`] in the scan's order: sessions as the scope lists them
/// (`order`), newest messages first, parts in order.
pub(super) fn first_in_scan_order(mut candidates: Vec<(usize, Candidate)>) -> Vec<Candidate> {
    candidates.sort_by(|(a_order, a), (b_order, b)| {
        a_order
            .cmp(b_order)
            .then_with(|| (b.message.seq, &b.message.id).cmp(&(a.message.seq, &a.message.id)))
            .then_with(|| a.part.rowid.cmp(&b.part.rowid))
    });
    candidates.into_iter().take(LITERAL_CANDIDATES).map(|(_, c)| c).collect()
}

/// The part rowids the trigram lookup walks down from: one session's own span (`None` when it
/// has no parts), else every rowid.
pub(super) fn trigram_span(conn: &Connection, views: &[View]) -> Result<Option<(i64, i64)>> {
    let [one] = views else { return Ok(Some((i64::MIN, i64::MAX))) };
    let span: (Option<i64>, Option<i64>) = conn
        .prepare_cached("SELECT min(rowid), max(rowid) FROM history_parts WHERE session_id = ?1")?
        .query_row([&one.session_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(match span {
        (Some(oldest), Some(newest)) => Some((oldest, newest.saturating_add(1))),
        _ => None,
    })
}

/// The whole query as one FTS5 phrase: with trigrams, a substring match.
pub(super) fn trigram_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// A message from eight columns starting at `first`: id, role, seq, turn, summary, compaction,
/// synthetic, created_at (the statements that read one select them in this order).
fn message_row(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        id: r.get(first)?,
        role: r.get(first + 1)?,
        seq: r.get(first + 2)?,
        turn: r.get(first + 3)?,
        summary: r.get(first + 4)?,
        compaction: r.get(first + 5)?,
        synthetic: r.get(first + 6)?,
        created_at: r.get(first + 7)?,
    })
}

/// Rowids as a JSON array, for `json_each`: a page of rows read in one statement.
fn json_ids(ids: &[i64]) -> String {
    use std::fmt::Write as _;
    let mut json = String::with_capacity(ids.len() * 9 + 2);
    json.push('[');
    for (i, id) in ids.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(json, "{sep}{id}");
    }
    json.push(']');
    json
}

/// The parts with these rowids that exist: session, the part, and its message's id. Only the
/// part's row is read (a B-tree lookup each); the message is read for the rows that need it
/// ([`messages_of`]).
fn parts_of(conn: &Connection, rowids: &[i64]) -> Result<Vec<(String, HitPart, String)>> {
    if rowids.is_empty() {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT p.rowid, p.session_id, p.id, p.kind, p.tool, p.message_id
         FROM json_each(?1) j JOIN history_parts p ON p.rowid = j.value",
    )?;
    let rows = stmt.query_map([json_ids(rowids)], |r| {
        let part =
            HitPart { rowid: r.get(0)?, id: r.get(2)?, kind: parse_kind(&r.get::<_, String>(3)?), tool: r.get(4)? };
        Ok((r.get(1)?, part, r.get(5)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The messages of these rows, in their order, in one statement; `None` where a row's message
/// is missing.
fn messages_of<'a>(conn: &Connection, rows: impl Iterator<Item = &'a Row>) -> Result<Vec<Option<MessageRow>>> {
    // Several parts of one message: each message read once, given to all of them.
    let mut keys: Vec<(&str, &str)> = Vec::new();
    let mut key_of: Vec<usize> = Vec::new();
    let mut place: HashMap<(&str, &str), usize> = HashMap::new();
    for row in rows {
        let key = (row.view.session_id.as_str(), row.message_id.as_str());
        let next = keys.len();
        let k = *place.entry(key).or_insert(next);
        if k == next {
            keys.push(key);
        }
        key_of.push(k);
    }
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let json = serde_json::to_string(&keys).map_err(|e| CairnError::internal(e.to_string()))?;
    let mut stmt = conn.prepare_cached(
        "SELECT j.key, m.id, m.role, m.seq, coalesce(m.turn_number, 0), m.summary, m.compaction, m.synthetic,
             m.created_at
         FROM json_each(?1) j JOIN history_messages m ON m.session_id = j.value ->> 0 AND m.id = j.value ->> 1",
    )?;
    let by_key: HashMap<i64, MessageRow> =
        stmt.query_map([json], |r| Ok((r.get(0)?, message_row(r, 1)?)))?.collect::<rusqlite::Result<_>>()?;
    Ok(key_of.iter().map(|&k| by_key.get(&(k as i64)).cloned()).collect())
}

/// Case-insensitive substring over the scope's parts, newest sessions and messages first.
pub(super) fn literal_candidates(
    conn: &Connection,
    views: &[View],
    kinds: &[&str],
    text: &str,
) -> Result<Vec<Candidate>> {
    let needle = text.to_lowercase();
    let mut candidates = Vec::new();
    for view in views {
        let mut stmt = conn.prepare_cached(
            "SELECT p.rowid FROM history_parts p JOIN history_messages m
                 ON m.session_id = p.session_id AND m.id = p.message_id
             WHERE p.session_id = ?1 AND p.kind IN ('text', 'subtask', 'reasoning', 'tool') AND p.injected = 0
               AND instr(lower(coalesce(p.text, '') || char(10) || coalesce(p.tool, '') || char(10)
                   || coalesce(p.input, '') || char(10) || coalesce(p.output, '')), ?2) > 0
             ORDER BY m.seq DESC, m.id DESC, p.idx LIMIT 300",
        )?;
        let rowids: Vec<i64> =
            stmt.query_map(params![view.session_id, needle], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        for rowid in rowids {
            let Some((session_id, message, part)) = hydrate(conn, rowid)? else { continue };
            let kind_ok = indexed_kind(part.kind).is_some_and(|k| kinds.contains(&k));
            if kind_ok && view.shows(&message) {
                candidates.push(Candidate { session_id, message, part, rank: 0.0 });
            }
        }
        if candidates.len() >= 300 {
            break;
        }
    }
    Ok(candidates)
}

/// The words of the query, lowercased, to place snippets.
pub(super) fn needles_of(terms: &[Term]) -> Vec<String> {
    terms
        .iter()
        .map(|t| match t {
            Term::Word(w) | Term::Prefix(w) | Term::Phrase(w) => w.to_lowercase(),
        })
        .collect()
}

pub(super) fn group_hits(
    conn: &Connection,
    candidates: Vec<Candidate>,
    needles: &[String],
    cfg: &HistorySettings,
) -> Result<SearchResults> {
    let limits = &cfg.search;
    let mut messages: Vec<SearchMessage> = Vec::new();
    let mut seen_parts: HashSet<(String, String)> = HashSet::new();
    for c in candidates {
        if c.part.kind == PartKind::Tool && !tool_searchable(c.part.tool.as_deref(), cfg) {
            continue;
        }
        if !seen_parts.insert((c.session_id.clone(), c.part.id.clone())) {
            continue;
        }
        let index = messages.iter().position(|m| m.session_id == c.session_id && m.message_id == c.message.id);
        let index = match index {
            Some(i) => i,
            None if messages.len() < limits.message_limit => {
                messages.push(SearchMessage {
                    session_id: c.session_id.clone(),
                    role: c.message.role.clone(),
                    turn_number: c.message.turn,
                    message_id: c.message.id.clone(),
                    hits: Vec::new(),
                    remain_hits: None,
                });
                messages.len() - 1
            }
            None => continue,
        };
        let message = &mut messages[index];
        if message.hits.len() < limits.max_hits_per_message {
            message.hits.push(hit_of(conn, &c.part, needles, cfg)?);
        } else {
            *message.remain_hits.get_or_insert(0) += 1;
        }
    }
    Ok(SearchResults { messages })
}

/// Tool I/O is searchable only where it would be shown.
pub(super) fn tool_searchable(tool: Option<&str>, cfg: &HistorySettings) -> bool {
    let name = tool.unwrap_or("");
    tool_shown(name, DEFAULT_INPUT_TOOLS, &cfg.show_tool_input)
        || tool_shown(name, DEFAULT_OUTPUT_TOOLS, &cfg.show_tool_output)
}

pub(super) fn hit_of(
    conn: &Connection,
    part: &HitPart,
    needles: &[String],
    cfg: &HistorySettings,
) -> Result<SearchHitPart> {
    let (text, input, output): (Option<String>, Option<String>, Option<String>) = conn
        .prepare_cached("SELECT text, input, output FROM history_parts WHERE rowid = ?1")?
        .query_row([part.rowid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let body = match part.kind {
        PartKind::Tool => [part.tool.as_deref(), input.as_deref(), output.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("\n"),
        _ => text.unwrap_or_default(),
    };
    Ok(SearchHitPart {
        kind: indexed_kind(part.kind).unwrap_or("text").to_owned(),
        tool_name: part.tool.clone(),
        part_id: part.id.clone(),
        snippets: snippets(&body, needles, cfg.search.snippet_length, cfg.search.max_snippets_per_hit),
    })
}

/// Windows of `length` characters around the first matches of the needles (ASCII
/// case-insensitive); the text's start when none is found (a stemmed match).
pub(super) fn snippets(text: &str, needles: &[String], length: usize, max: usize) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut starts: Vec<usize> = needles
        .iter()
        .filter(|n| !n.is_empty())
        .flat_map(|n| lower.match_indices(n.as_str()).map(|(i, _)| i).take(max))
        .collect();
    starts.sort_unstable();
    let mut windows: Vec<String> = Vec::new();
    let mut covered_until = 0;
    for start in starts {
        if windows.len() >= max {
            break;
        }
        if start < covered_until && !windows.is_empty() {
            continue;
        }
        let (window, end) = window_around(text, start, length);
        covered_until = end;
        windows.push(window);
    }
    if windows.is_empty() && !text.trim().is_empty() {
        windows.push(window_around(text, 0, length).0);
    }
    windows
}

/// About `length` characters of `text` around byte `at` (a third before it), with `…` where
/// cut; and the byte where the window ends.
pub(super) fn window_around(text: &str, at: usize, length: usize) -> (String, usize) {
    let before_chars = length / 3;
    let start = text[..at].char_indices().rev().nth(before_chars.saturating_sub(1)).map_or(0, |(i, _)| i);
    let start = if at == 0 { 0 } else { start };
    let end = text[start..].char_indices().nth(length).map_or(text.len(), |(i, _)| start + i);
    let flat = text[start..end].split_whitespace().collect::<Vec<_>>().join(" ");
    let lead = if start > 0 { "…" } else { "" };
    let tail = if end < text.len() { "…" } else { "" };
    (format!("{lead}{flat}{tail}"), end)
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
