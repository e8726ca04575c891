//! What the index holds of a part: which kinds are searchable and the text each gives (long
//! parts by their two ends). The store writes it, the scan indexer reads it back.

use crate::model::{HistoryPart, PartKind};

/// The index holds at most this much of one part (the whole is stored): a part up to this size
/// whole, a longer one by its first [`INDEXED_HEAD_BYTES`] and its last [`INDEXED_TAIL_BYTES`].
/// A 5 MB tool output is found by its start and by its end (where a build log's error is) and
/// does not cost 5 MB of postings. The budget is what the index held when it kept only the
/// start: indexing 32 KiB of each end as well cost the 1M-part ingest 10% (docs/BENCHMARKS.md).
pub const INDEXED_BYTES: usize = 32 * 1024;

/// The start of a long part in the index: a command, its arguments and its first output.
pub const INDEXED_HEAD_BYTES: usize = 24 * 1024;

/// The end of a long part in the index: the last hundred lines or so of a log, where its
/// errors and summary are.
pub const INDEXED_TAIL_BYTES: usize = INDEXED_BYTES - INDEXED_HEAD_BYTES;

/// The searchable type of a part kind (`history_search`'s `type`), or `None` when not indexed.
pub(crate) fn indexed_kind(kind: PartKind) -> Option<&'static str> {
    match kind {
        PartKind::Text | PartKind::Subtask => Some("text"),
        PartKind::Reasoning => Some("reasoning"),
        PartKind::Tool => Some("tool"),
        PartKind::File | PartKind::Image | PartKind::Compaction => None,
    }
}

/// About how much of `part` the index holds (what [`indexed_body`] makes of it).
pub(crate) fn indexed_len(part: &HistoryPart) -> u64 {
    if indexed_kind(part.kind).is_none() || part.injected {
        return 0;
    }
    let len = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let whole = if part.kind == PartKind::Tool {
        len(&part.tool) + len(&part.input) + len(&part.output)
    } else {
        len(&part.text)
    };
    whole.min(INDEXED_BYTES) as u64
}

/// What the index holds of a part: its text, or a tool's name, input and output (joined by
/// newlines); whole up to [`INDEXED_BYTES`], else its first [`INDEXED_HEAD_BYTES`] and its last
/// [`INDEXED_TAIL_BYTES`] (empty for a kind that is not indexed).
pub(crate) fn indexed_body(
    kind: PartKind,
    tool: Option<&str>,
    text: Option<&str>,
    input: Option<&str>,
    output: Option<&str>,
) -> String {
    if indexed_kind(kind).is_none() {
        return String::new();
    }
    let pieces: Vec<&str> = if kind == PartKind::Tool { vec![tool, input, output] } else { vec![text] }
        .into_iter()
        .flatten()
        .filter(|p| !p.is_empty())
        .collect();
    let whole = pieces.iter().map(|p| p.len() + 1).sum::<usize>().saturating_sub(1);
    if whole <= INDEXED_BYTES {
        return pieces.join("\n");
    }
    let mut body = String::with_capacity(INDEXED_BYTES + 1);
    // the start: pieces in order until INDEXED_HEAD_BYTES
    for piece in &pieces {
        let room = INDEXED_HEAD_BYTES.saturating_sub(body.len() + usize::from(!body.is_empty()));
        if room == 0 {
            break;
        }
        if !body.is_empty() {
            body.push('\n');
        }
        body.push_str(cairn_base::text::cut_at_char_boundary(piece, room));
    }
    // the end: the last INDEXED_TAIL_BYTES, the pieces from the last one backwards
    let mut tail: Vec<&str> = Vec::new();
    let mut taken = 0;
    for piece in pieces.iter().rev() {
        let room = INDEXED_TAIL_BYTES.saturating_sub(taken + usize::from(!tail.is_empty()));
        if room == 0 {
            break;
        }
        let end = last_at_char_boundary(piece, room);
        taken += end.len() + usize::from(!tail.is_empty());
        tail.push(end);
    }
    for piece in tail.iter().rev() {
        body.push('\n');
        body.push_str(piece);
    }
    body
}

/// The last `max` bytes of `text` at most, starting on a character boundary.
fn last_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
