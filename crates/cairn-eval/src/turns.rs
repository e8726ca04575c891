//! What a conversation turn is embedded with (`--turn-context`): the stored memory, what
//! search returns and what is scored stay the turn; only the text its vector is computed from
//! changes. LoCoMo's multi-hop questions name facts spread over neighbouring turns ("Yes, last
//! Tuesday!" answers the turn before it), so a turn embedded with its neighbours may be found
//! by a question about either.

use anyhow::Result;
use cairn_core::CairnError;
use cairn_core::search::semantic::{CONTEXT_CHARS, embed_text, embed_text_in_context};

/// `--turn-context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnContext {
    /// cairn's own rule (`search/semantic.rs`): the previous turn, for short turns only.
    Shipped,
    /// The turn alone.
    Alone,
    /// The previous turn, for every turn.
    Previous,
    /// This many turns before and after, for every turn.
    Around(usize),
}

impl TurnContext {
    pub fn parse(text: &str) -> Result<TurnContext> {
        let around = text.strip_prefix("around:").map(str::parse::<usize>);
        Ok(match (text, around) {
            ("shipped", _) => TurnContext::Shipped,
            ("none", _) => TurnContext::Alone,
            ("prev", _) => TurnContext::Previous,
            (_, Some(Ok(n))) if (1..=8).contains(&n) => TurnContext::Around(n),
            _ => {
                return Err(CairnError::invalid(format!("unknown --turn-context {text:?}"))
                    .with_hint("use shipped, none, prev or around:N (N from 1 to 8)")
                    .into());
            }
        })
    }

    /// A name for reports and cache-free comparisons.
    pub fn label(self) -> String {
        match self {
            TurnContext::Shipped => "shipped".into(),
            TurnContext::Alone => "none".into(),
            TurnContext::Previous => "prev".into(),
            TurnContext::Around(n) => format!("around:{n}"),
        }
    }
}

/// One turn of a session, as saved.
pub struct Turn {
    pub id: i64,
    pub speaker: String,
    pub title: String,
    pub content: String,
}

/// The text each turn of one session is embedded from, by memory id; empty for `Shipped`
/// (the store's own rule applies).
pub fn session_texts(turns: &[Turn], context: TurnContext) -> Vec<(i64, String)> {
    turns
        .iter()
        .enumerate()
        .filter_map(|(i, turn)| {
            let text = match context {
                TurnContext::Shipped => return None,
                TurnContext::Alone => embed_text(&turn.title, &turn.content),
                TurnContext::Previous => {
                    let before = i.checked_sub(1).map_or("", |p| turns[p].content.as_str());
                    embed_text_in_context(&turn.title, &turn.content, before)
                }
                TurnContext::Around(n) => around(turns, i, n),
            };
            Some((turn.id, text))
        })
        .collect()
}

/// The turn's title and content between up to `n` turns before and `n` after it, each
/// neighbour as `speaker: content` cut to cairn's context length.
fn around(turns: &[Turn], i: usize, n: usize) -> String {
    let turn = &turns[i];
    let neighbour = |t: &Turn| format!("{}: {}", t.speaker, cut(t.content.trim(), CONTEXT_CHARS));
    let before: Vec<String> = turns[i.saturating_sub(n)..i].iter().map(neighbour).collect();
    let after: Vec<String> = turns[i + 1..(i + 1 + n).min(turns.len())].iter().map(neighbour).collect();
    let mut text = format!("{}.\n", turn.title.trim());
    for line in before.iter().chain([&turn.content]).chain(&after) {
        text.push_str(line);
        text.push('\n');
    }
    text.truncate(text.trim_end().len());
    text
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns() -> Vec<Turn> {
        ["Hi, how was the race?", "Great! I ran it in 3 hours.", "Wow, congrats!", "Thanks!"]
            .iter()
            .enumerate()
            .map(|(i, c)| Turn {
                id: i as i64 + 1,
                speaker: if i % 2 == 0 { "Ann".into() } else { "Bob".into() },
                title: format!("{} (8 May)", if i % 2 == 0 { "Ann" } else { "Bob" }),
                content: (*c).to_owned(),
            })
            .collect()
    }

    #[test]
    fn around_one_embeds_the_turn_between_its_neighbours_within_the_session() {
        let texts = session_texts(&turns(), TurnContext::Around(1));
        assert_eq!(texts[0], (1, "Ann (8 May).\nHi, how was the race?\nBob: Great! I ran it in 3 hours.".into()));
        assert_eq!(
            texts[2].1, "Ann (8 May).\nBob: Great! I ran it in 3 hours.\nWow, congrats!\nBob: Thanks!",
            "one turn each side, speakers named"
        );
        assert_eq!(texts[3].1, "Bob (8 May).\nAnn: Wow, congrats!\nThanks!", "the last turn has nothing after it");
    }

    #[test]
    fn shipped_leaves_the_text_to_the_store_and_none_embeds_the_turn_alone() {
        assert!(session_texts(&turns(), TurnContext::Shipped).is_empty());
        let alone = session_texts(&turns(), TurnContext::Alone);
        assert_eq!(alone[1].1, embed_text("Bob (8 May)", "Great! I ran it in 3 hours."));
        let prev = session_texts(&turns(), TurnContext::Previous);
        assert_eq!(
            prev[1].1,
            embed_text_in_context("Bob (8 May)", "Great! I ran it in 3 hours.", "Hi, how was the race?")
        );
    }

    #[test]
    fn parse_accepts_the_documented_values_and_rejects_others() {
        assert_eq!(TurnContext::parse("around:2").unwrap(), TurnContext::Around(2));
        assert_eq!(TurnContext::parse("none").unwrap(), TurnContext::Alone);
        for bad in ["around:0", "around:x", "next", ""] {
            assert!(TurnContext::parse(bad).is_err(), "{bad}");
        }
    }
}
