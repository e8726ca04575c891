//! `<private>` blocks, found by a scanner that counts depth and fails closed.
//!
//! A tag is `<`, optional whitespace, an optional `/` (a closer), optional whitespace, `private`
//! in any case, then anything but a letter or digit (so `<privateer>` is another tag), up to the
//! next `>` (or the end of the text). So attributes (`<private note="x">`), whitespace and
//! newlines inside the tag, `</private >` and `<private/>` are all tags.
//!
//! Every unusual shape redacts more, never less:
//! - nested blocks redact to their outermost closer;
//! - an opener with no closer (`<private/>` included: it opens and never closes) redacts to the
//!   end of the text;
//! - a stray closer (no opener before it) means the opener was mistyped, so where the private
//!   part began is unknown: the whole text is redacted.

use std::borrow::Cow;

use super::REDACTED;

/// The tag's name (`<private>`, `</PRIVATE …>`), matched in any case.
pub const PRIVATE_TAG: &str = "private";
const NAME: &[u8] = PRIVATE_TAG.as_bytes();

/// A `<private…>` or `</private…>` tag starting at a `<`: whether it closes, and the byte just
/// after it.
struct Tag {
    closing: bool,
    end: usize,
}

/// The tag starting at `at` (a `<`), if it is one of ours.
fn tag_at(bytes: &[u8], at: usize) -> Option<Tag> {
    let mut i = skip_whitespace(bytes, at + 1);
    let closing = bytes.get(i) == Some(&b'/');
    if closing {
        i = skip_whitespace(bytes, i + 1);
    }
    if !bytes.get(i..i + NAME.len())?.eq_ignore_ascii_case(NAME) {
        return None;
    }
    i += NAME.len();
    if bytes.get(i).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    // A tag cut short at the end of the text runs to the end.
    let end = memchr::memchr(b'>', &bytes[i..]).map_or(bytes.len(), |p| i + p + 1);
    Some(Tag { closing, end })
}

fn skip_whitespace(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// `text` with every private block replaced by `[REDACTED]` (and trimmed when anything was), and
/// whether anything was. Text with no tag is returned as it is, unallocated: every archived
/// message passes through here, so the `<`s are found a vector at a time and only they are
/// looked at.
pub(super) fn redact_private(text: &str) -> (Cow<'_, str>, bool) {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut kept_from = 0;
    let mut depth = 0usize;
    let mut block_start = 0;
    let mut found = false;
    let mut pos = 0;
    while let Some(offset) = memchr::memchr(b'<', &bytes[pos..]) {
        let at = pos + offset;
        let Some(tag) = tag_at(bytes, at) else {
            pos = at + 1;
            continue;
        };
        found = true;
        if tag.closing {
            if depth == 0 {
                return (Cow::Borrowed(REDACTED), true);
            }
            depth -= 1;
            if depth == 0 {
                out.push_str(&text[kept_from..block_start]);
                out.push_str(REDACTED);
                kept_from = tag.end;
            }
        } else {
            if depth == 0 {
                block_start = at;
            }
            depth += 1;
        }
        pos = tag.end;
    }
    if !found {
        return (Cow::Borrowed(text), false);
    }
    if depth > 0 {
        out.push_str(&text[kept_from..block_start]);
        out.push_str(REDACTED);
    } else {
        out.push_str(&text[kept_from..]);
    }
    let trimmed = out.trim();
    if trimmed.len() == out.len() { (Cow::Owned(out), true) } else { (Cow::Owned(trimmed.to_owned()), true) }
}
