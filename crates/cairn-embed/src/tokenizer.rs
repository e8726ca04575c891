//! BERT's uncased WordPiece tokenizer, as the `tokenizers` library runs it for
//! all-MiniLM-L6-v2 (`BertNormalizer` → `BertPreTokenizer` → `WordPiece` → `[CLS] … [SEP]`),
//! without padding (the shipped `tokenizer.json` pads to 128; averaging those pads into the
//! mean pooling ruins every vector) and truncated to the model's sequence length.
//!
//! Checked token for token against the `tokenizers` library in the fixture test.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

use crate::EmbedError;

/// Longest word WordPiece splits; longer ones become `[UNK]` (the library's default).
const MAX_WORD_CHARS: usize = 100;

#[derive(Debug, Clone)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
    /// Tokens per sequence, `[CLS]` and `[SEP]` included.
    max_len: usize,
}

impl WordPiece {
    /// Reads the vocabulary from a `tokenizer.json` (`model.vocab`).
    pub fn from_tokenizer_json(json: &[u8], max_len: usize) -> Result<Self, EmbedError> {
        let doc: serde_json::Value = serde_json::from_slice(json)
            .map_err(|e| EmbedError::ModelInvalid(format!("tokenizer.json is not valid JSON: {e}")))?;
        let model = &doc["model"];
        if model["type"].as_str().is_some_and(|t| t != "WordPiece") {
            return Err(EmbedError::ModelInvalid(format!(
                "tokenizer.json has a {} model; only WordPiece (BERT) models are supported",
                model["type"]
            )));
        }
        let vocab = model["vocab"]
            .as_object()
            .ok_or_else(|| EmbedError::ModelInvalid("tokenizer.json has no model.vocab".into()))?
            .iter()
            .map(|(token, id)| {
                let id = id.as_u64().and_then(|i| u32::try_from(i).ok());
                id.map(|id| (token.clone(), id))
                    .ok_or_else(|| EmbedError::ModelInvalid(format!("tokenizer.json: bad id for token {token:?}")))
            })
            .collect::<Result<HashMap<_, _>, _>>()?;
        Self::new(vocab, max_len)
    }

    pub fn new(vocab: HashMap<String, u32>, max_len: usize) -> Result<Self, EmbedError> {
        let special = |name: &str| {
            vocab
                .get(name)
                .copied()
                .ok_or_else(|| EmbedError::ModelInvalid(format!("the vocabulary has no {name} token")))
        };
        Ok(Self {
            unk: special("[UNK]")?,
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            vocab,
            max_len: max_len.max(2),
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.values().map(|&id| id as usize + 1).max().unwrap_or(0)
    }

    /// Token ids of one text: `[CLS]`, its word pieces (truncated), `[SEP]`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let budget = self.max_len - 2;
        let mut ids = Vec::with_capacity(budget.min(text.len() / 3 + 2));
        ids.push(self.cls);
        'words: for word in pre_tokenize(&normalize(text)) {
            for id in self.word_pieces(&word) {
                if ids.len() > budget {
                    break 'words;
                }
                ids.push(id);
            }
        }
        ids.push(self.sep);
        ids
    }

    /// Greedy longest-match-first; a word with any unmatchable rest is one `[UNK]`.
    fn word_pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut candidate = String::with_capacity(word.len() + 2);
        while start < chars.len() {
            let mut found = None;
            for end in (start + 1..=chars.len()).rev() {
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |c| c.0);
                candidate.clear();
                if start > 0 {
                    candidate.push_str("##");
                }
                candidate.push_str(&word[from..to]);
                if let Some(&id) = self.vocab.get(&candidate) {
                    found = Some((id, end));
                    break;
                }
            }
            let Some((id, end)) = found else { return vec![self.unk] };
            pieces.push(id);
            start = end;
        }
        pieces
    }
}

/// `BertNormalizer` with clean_text, handle_chinese_chars, strip_accents and lowercase on.
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_chinese(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else if is_whitespace(c) {
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    cleaned.nfd().filter(|&c| !unicode_normalization::char::is_combining_mark(c)).flat_map(char::to_lowercase).collect()
}

/// `BertPreTokenizer`: split on whitespace, and every punctuation character is a word.
fn pre_tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_whitespace() || is_punctuation(c) {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            if is_punctuation(c) {
                words.push(c.to_string());
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// Control (Cc) and format (Cf) characters and private use, which BERT drops.
fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    c.is_control()
        || matches!(c as u32,
            0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x180E | 0x200B..=0x200F
            | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB
            | 0xE000..=0xF8FF | 0xE0001 | 0xE0020..=0xE007F | 0xF0000..=0x10FFFF)
}

/// ASCII symbols count as punctuation for BERT, plus Unicode's punctuation (P*) ranges.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32,
            0x00A1 | 0x00A7 | 0x00AB | 0x00B6 | 0x00B7 | 0x00BB | 0x00BF | 0x037E | 0x0387
            | 0x055A..=0x055F | 0x0589..=0x058A | 0x05BE | 0x05C0 | 0x05C3 | 0x05C6 | 0x05F3..=0x05F4
            | 0x0609..=0x060A | 0x060C..=0x060D | 0x061B | 0x061E..=0x061F | 0x066A..=0x066D | 0x06D4
            | 0x0964..=0x0965 | 0x0970 | 0x0E4F | 0x0E5A..=0x0E5B | 0x2010..=0x2027 | 0x2030..=0x2043
            | 0x2045..=0x2051 | 0x2053..=0x205E | 0x207D..=0x207E | 0x208D..=0x208E | 0x2308..=0x230B
            | 0x2329..=0x232A | 0x2768..=0x2775 | 0x27C5..=0x27C6 | 0x27E6..=0x27EF | 0x2983..=0x2998
            | 0x29D8..=0x29DB | 0x29FC..=0x29FD | 0x2CF9..=0x2CFC | 0x2CFE..=0x2CFF | 0x2E00..=0x2E4F
            | 0x3001..=0x3003 | 0x3008..=0x3011 | 0x3014..=0x301F | 0x3030 | 0x303D | 0x30A0 | 0x30FB
            | 0xFE10..=0xFE19 | 0xFE30..=0xFE52 | 0xFE54..=0xFE61 | 0xFE63 | 0xFE68 | 0xFE6A..=0xFE6B
            | 0xFF01..=0xFF03 | 0xFF05..=0xFF0A | 0xFF0C..=0xFF0F | 0xFF1A..=0xFF1B | 0xFF1F..=0xFF20
            | 0xFF3B..=0xFF3D | 0xFF3F | 0xFF5B | 0xFF5D | 0xFF5F..=0xFF65)
}

/// CJK ideographs, which BERT splits into one word each.
fn is_chinese(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        let words =
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "run", "the", "?", "cafe", "¿", "como"];
        let vocab = words.iter().enumerate().map(|(i, w)| (w.to_string(), i as u32)).collect();
        WordPiece::new(vocab, 8).unwrap()
    }

    #[test]
    fn splits_words_into_longest_pieces() {
        assert_eq!(tiny().encode("unaffable"), vec![2, 4, 5, 6, 3]);
    }

    #[test]
    fn lowercases_strips_accents_and_isolates_punctuation() {
        assert_eq!(tiny().encode("¿CÓMO Café?"), vec![2, 11, 12, 10, 9, 3]);
    }

    #[test]
    fn unknown_rest_makes_the_whole_word_unknown() {
        assert_eq!(tiny().encode("unx run"), vec![2, 1, 7, 3]);
    }

    #[test]
    fn truncates_to_the_sequence_length_keeping_sep() {
        let ids = tiny().encode("run run run run run run run run run");
        assert_eq!(ids.len(), 8);
        assert_eq!((ids[0], ids[7]), (2, 3));
    }

    #[test]
    fn control_characters_vanish_and_whitespace_splits() {
        assert_eq!(tiny().encode("r\u{200b}un\tthe\u{0}"), vec![2, 7, 8, 3]);
    }

    #[test]
    fn empty_text_is_cls_sep() {
        assert_eq!(tiny().encode("  "), vec![2, 3]);
    }
}
