// `<private>` redaction before any text leaves OpenCode's process. It stays here (the text must
// not reach the daemon unredacted), and reads tags exactly as cairn's own scanner does
// (`cairn-base` `text/private.rs`): both are tested on `tests/fixtures/redaction-cases.json`.
// The marker and the tag's name come from the Rust source (rules.ts).

import { PRIVATE_TAG, REDACTED } from "./rules.ts";
import type { Dict, Json } from "./util.ts";

/**
 * A `<private…>` or `</private…>` tag at `at` (a `<`): `<`, optional whitespace, an optional `/`,
 * optional whitespace, `private` in any case, then anything but a letter or digit, up to the next
 * `>` (or the end).
 */
function privateTagAt(text: string, at: number): { closing: boolean; end: number } | null {
  let i = at + 1;
  while (i < text.length && /\s/.test(text[i])) i++;
  const closing = text[i] === "/";
  if (closing) {
    i++;
    while (i < text.length && /\s/.test(text[i])) i++;
  }
  if (text.slice(i, i + PRIVATE_TAG.length).toLowerCase() !== PRIVATE_TAG) return null;
  i += PRIVATE_TAG.length;
  if (i < text.length && /[A-Za-z0-9]/.test(text[i])) return null;
  const close = text.indexOf(">", i);
  return { closing, end: close < 0 ? text.length : close + 1 };
}

/**
 * `<private>…</private>` → `[REDACTED]`, failing closed: nested blocks to their outermost closer,
 * attributes and whitespace inside tags allowed, an opener with no closer (`<private/>` too) to
 * the end, a stray closer the whole text.
 */
export function stripPrivate(text: string): string {
  let out = "";
  let keptFrom = 0;
  let depth = 0;
  let blockStart = 0;
  let found = false;
  let pos = 0;
  for (let at = text.indexOf("<", pos); at >= 0; at = text.indexOf("<", pos)) {
    const tag = privateTagAt(text, at);
    if (!tag) {
      pos = at + 1;
      continue;
    }
    found = true;
    if (tag.closing) {
      if (depth === 0) return REDACTED;
      depth--;
      if (depth === 0) {
        out += text.slice(keptFrom, blockStart) + REDACTED;
        keptFrom = tag.end;
      }
    } else {
      if (depth === 0) blockStart = at;
      depth++;
    }
    pos = tag.end;
  }
  if (!found) return text;
  out += depth > 0 ? text.slice(keptFrom, blockStart) + REDACTED : text.slice(keptFrom);
  return out.trim();
}

/** Every string inside a request body, stripped. */
export function redactDeep(v: Json): Json {
  if (typeof v === "string") return stripPrivate(v);
  if (Array.isArray(v)) return v.map(redactDeep);
  if (v && typeof v === "object") {
    const out: Dict = {};
    for (const [k, x] of Object.entries(v)) out[k] = redactDeep(x);
    return out;
  }
  return v;
}
