//! Tailing a JSON Lines file a host is still writing, for every transcript reader (Claude
//! Code's, Codex's rollouts, Gemini CLI's chats): read from the cursor's byte offset, stop
//! before a partial last line (the host is still writing it; the next read takes it whole),
//! start over when the file shrank (a new file under the old name), and skip, counted, a line
//! too long to load.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::model::Cursor;
use super::text::SkipCounter;
use cairn_base::error::{CairnError, ErrorCode, Result};

/// What one read of a file gave: the cursor after it, whether whole lines remain, the skips.
pub(crate) struct Tail {
    pub next: Cursor,
    pub more: bool,
    pub skips: SkipCounter,
}

/// Read what is new in `path` after `cursor`, at most about `max_bytes` (a line is never
/// split), handing each complete line and its offset to `line`.
pub(crate) fn tail(
    path: &Path,
    cursor: &Cursor,
    max_bytes: usize,
    max_line: u64,
    line: &mut dyn FnMut(&[u8], u64, &mut SkipCounter),
) -> Result<Tail> {
    let mut file = File::open(path).map_err(|e| unreadable(path, &e))?;
    let meta = file.metadata().map_err(|e| unreadable(path, &e))?;
    let size = meta.len();
    let mtime_ms = mtime_ms(&meta);
    let mut skips = SkipCounter::default();
    let start = if size < cursor.offset {
        skips.add("file_shrunk");
        0
    } else {
        cursor.offset
    };
    let mut next = Cursor { offset: start, size, mtime_ms, watermark: None };
    if start == size {
        return Ok(Tail { next, more: false, skips });
    }
    let chunk = read_chunk(&mut file, start, size, max_bytes).map_err(|e| unreadable(path, &e))?;
    // When the chunk reached the end of the file, what follows its last newline is a partial
    // line: no more to read until the host finishes it.
    let reached_end = start + chunk.len() as u64 >= size;
    let consumed = match last_newline(&chunk) {
        Some(end) => {
            lines(&chunk[..=end], start, &mut skips, line);
            end as u64 + 1
        }
        None => {
            // No whole line in the chunk: either a partial last line (wait for it) or one line
            // longer than the chunk (read it alone, or skip it when it is absurdly long).
            long_line(&mut file, (start, size), max_line, &mut skips, line)
                .map_err(|e| unreadable(path, &e))?
                .unwrap_or_default()
        }
    };
    next.offset = start + consumed;
    let more = consumed > 0 && next.offset < size && !(reached_end && last_newline(&chunk).is_some());
    Ok(Tail { next, more, skips })
}

/// Every complete line of `buf` (which ends with `\n`), `base` its offset in the file; blank
/// lines are passed over and a `\r` before the newline dropped.
fn lines(buf: &[u8], base: u64, skips: &mut SkipCounter, line: &mut dyn FnMut(&[u8], u64, &mut SkipCounter)) {
    let mut at = 0usize;
    while at < buf.len() {
        let end = memchr::memchr(b'\n', &buf[at..]).map_or(buf.len(), |i| at + i);
        let text = &buf[at..end];
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if !text.iter().all(u8::is_ascii_whitespace) {
            line(text, base + at as u64, skips);
        }
        at = end + 1;
    }
}

/// The entries of `dir`, sorted by path (none when it cannot be read): how every reader lists a
/// host's session directories, in the same order on every run.
pub(crate) fn sorted_dir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut entries: Vec<std::path::PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    };
    entries.sort();
    entries
}

pub(crate) fn unreadable(path: &Path, err: &std::io::Error) -> CairnError {
    CairnError::new(ErrorCode::HistorySourceUnreadable, format!("cannot read {}: {err}", path.display()))
}

pub(crate) fn mtime_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_millis() as i64)
}

fn read_chunk(file: &mut File, start: u64, size: u64, max_bytes: usize) -> std::io::Result<Vec<u8>> {
    let want = (size - start).min(max_bytes.max(1) as u64) as usize;
    let mut buf = vec![0u8; want];
    file.seek(SeekFrom::Start(start))?;
    let mut got = 0;
    while got < want {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    buf.truncate(got);
    Ok(buf)
}

fn last_newline(buf: &[u8]) -> Option<usize> {
    memchr::memrchr(b'\n', buf)
}

/// The line at `start` is longer than a chunk. Find its end by streaming; parse it if it is at
/// most `max_line` bytes, else count it skipped. `None`: it has no end yet (being written).
fn long_line(
    file: &mut File,
    (start, size): (u64, u64),
    max_line: u64,
    skips: &mut SkipCounter,
    line: &mut dyn FnMut(&[u8], u64, &mut SkipCounter),
) -> std::io::Result<Option<u64>> {
    file.seek(SeekFrom::Start(start))?;
    let mut pos = start;
    let mut buf = vec![0u8; 1 << 20];
    let end = loop {
        if pos >= size {
            return Ok(None);
        }
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            break pos + i as u64;
        }
        pos += n as u64;
    };
    let len = end - start + 1;
    if len > max_line {
        skips.add("line_too_large");
        return Ok(Some(len));
    }
    let text = read_chunk(file, start, end + 1, len as usize)?;
    lines(&text, start, skips, line);
    Ok(Some(len))
}
