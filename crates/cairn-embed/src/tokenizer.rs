//! Text → token ids with Hugging Face's `tokenizers` crate, set up by the model's own
//! `tokenizer.json`: its normalizer, pre-tokenizer, model (WordPiece for BERT and MiniLM; BPE
//! and Unigram load the same way) and the special tokens its post-processor adds (`[CLS] … [SEP]`
//! for BERT).
//!
//! Two settings of the file are replaced:
//! - padding is off (the shipped all-MiniLM-L6-v2 `tokenizer.json` pads to 128; averaging those
//!   pads into the mean pooling ruins every vector). One text is encoded at a time, so its
//!   attention mask is all ones and the encoder is given the ids alone;
//! - truncation is to the model's sequence length, special tokens included (the file's own
//!   limit is not the one sentence-transformers uses).
//!
//! A Unigram model (XLM-R, multilingual-e5) runs on [`CompactUnigram`] rather than the crate's
//! own, which needs ~270 MB for XLM-R's 250k pieces; the rest of the pipeline is the file's.

use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper, Tokenizer, TokenizerImpl,
    TruncationDirection, TruncationParams, TruncationStrategy,
};

use crate::EmbedError;
use crate::unigram::CompactUnigram;

type UnigramTokenizer =
    TokenizerImpl<CompactUnigram, NormalizerWrapper, PreTokenizerWrapper, PostProcessorWrapper, DecoderWrapper>;

pub struct TextTokenizer {
    inner: Inner,
}

enum Inner {
    Hf(Box<Tokenizer>),
    Unigram(Box<UnigramTokenizer>),
}

/// Just the model's type, to choose how to read the file.
#[derive(serde::Deserialize)]
struct Probe {
    model: ProbeModel,
}

#[derive(serde::Deserialize)]
struct ProbeModel {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    byte_fallback: bool,
}

/// The parts of a Unigram `tokenizer.json` that [`CompactUnigram`] runs with.
#[derive(serde::Deserialize)]
struct UnigramFile {
    #[serde(default)]
    added_tokens: Vec<AddedTokenSpec>,
    normalizer: Option<NormalizerWrapper>,
    pre_tokenizer: Option<PreTokenizerWrapper>,
    post_processor: Option<PostProcessorWrapper>,
    decoder: Option<DecoderWrapper>,
    model: UnigramModel,
}

#[derive(serde::Deserialize)]
struct UnigramModel {
    unk_id: Option<usize>,
    vocab: Vec<(String, f64)>,
}

#[derive(serde::Deserialize)]
struct AddedTokenSpec {
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    normalized: bool,
    #[serde(default)]
    special: bool,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer").field("vocab_size", &self.vocab_size()).finish_non_exhaustive()
    }
}

impl TextTokenizer {
    /// Reads a `tokenizer.json`; `max_len` is the number of tokens per text, special tokens
    /// included.
    pub fn from_tokenizer_json(json: &[u8], max_len: usize) -> Result<Self, EmbedError> {
        let truncation = TruncationParams {
            // Room for the special tokens at least, else every encoding fails.
            max_length: max_len.max(2),
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction: TruncationDirection::Right,
        };
        let probe: Option<Probe> = serde_json::from_slice(json).ok();
        let unigram = probe.is_some_and(|p| p.model.kind.as_deref() == Some("Unigram") && !p.model.byte_fallback);
        let inner = if unigram {
            let file: UnigramFile = serde_json::from_slice(json).map_err(|e| invalid(&e))?;
            let unk_id = file.model.unk_id.ok_or_else(|| invalid(&"a Unigram model without unk_id"))?;
            let model = CompactUnigram::new(file.model.vocab, unk_id).map_err(|e| invalid(&e))?;
            let mut t = UnigramTokenizer::new(model);
            t.with_normalizer(file.normalizer).map_err(|e| invalid(&e))?;
            t.with_pre_tokenizer(file.pre_tokenizer)
                .with_post_processor(file.post_processor)
                .with_decoder(file.decoder);
            let (special, plain): (Vec<_>, Vec<_>) = file
                .added_tokens
                .into_iter()
                .map(|a| {
                    let token = AddedToken {
                        content: a.content,
                        single_word: a.single_word,
                        lstrip: a.lstrip,
                        rstrip: a.rstrip,
                        normalized: a.normalized,
                        special: a.special,
                    };
                    (a.special, token)
                })
                .partition(|(special, _)| *special);
            t.add_special_tokens(special.into_iter().map(|(_, t)| t)).map_err(|e| invalid(&e))?;
            t.add_tokens(plain.into_iter().map(|(_, t)| t)).map_err(|e| invalid(&e))?;
            t.with_padding(None);
            t.with_truncation(Some(truncation)).map_err(|e| invalid(&e))?;
            Inner::Unigram(Box::new(t))
        } else {
            let mut t = Tokenizer::from_bytes(json).map_err(|e| invalid(&e))?;
            t.with_padding(None);
            t.with_truncation(Some(truncation)).map_err(|e| invalid(&e))?;
            Inner::Hf(Box::new(t))
        };
        Ok(Self { inner })
    }

    /// Tokens the model must have an embedding row for, added tokens included.
    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Hf(t) => t.get_vocab_size(true),
            Inner::Unigram(t) => t.get_vocab_size(true),
        }
    }

    /// Token ids of one text, special tokens included, truncated.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        // `encode_fast` skips the character offsets, which nothing here needs.
        let encoding = match &self.inner {
            Inner::Hf(t) => t.encode_fast(text, true),
            Inner::Unigram(t) => t.encode_fast(text, true),
        }
        .map_err(|e| invalid(&e))?;
        debug_assert!(encoding.get_attention_mask().iter().all(|&m| m == 1), "padding is off");
        Ok(encoding.get_ids().to_vec())
    }
}

fn invalid(error: &dyn std::fmt::Display) -> EmbedError {
    EmbedError::ModelInvalid(format!("tokenizer.json: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BERT-style `tokenizer.json` in miniature: uncased normalizer, BERT pre-tokenizer,
    /// WordPiece, `[CLS] $A [SEP]`, and the padding to 128 of the real file.
    fn tiny(max_len: usize) -> TextTokenizer {
        let words =
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "run", "the", "?", "cafe", "¿", "como"];
        let vocab: serde_json::Map<String, serde_json::Value> =
            words.iter().enumerate().map(|(i, w)| (w.to_string(), i.into())).collect();
        let json = serde_json::json!({
            "version": "1.0",
            "truncation": {"direction": "Right", "max_length": 128, "strategy": "LongestFirst", "stride": 0},
            "padding": {"strategy": {"Fixed": 128}, "direction": "Right", "pad_to_multiple_of": null,
                        "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
            "added_tokens": [],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                           "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                   "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "decoder": null,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}
        });
        TextTokenizer::from_tokenizer_json(json.to_string().as_bytes(), max_len).unwrap()
    }

    #[test]
    fn splits_words_into_longest_pieces_without_padding() {
        assert_eq!(tiny(8).encode("unaffable").unwrap(), vec![2, 4, 5, 6, 3]);
    }

    #[test]
    fn lowercases_strips_accents_and_isolates_punctuation() {
        assert_eq!(tiny(8).encode("¿CÓMO Café?").unwrap(), vec![2, 11, 12, 10, 9, 3]);
    }

    #[test]
    fn truncates_to_the_sequence_length_keeping_sep() {
        let ids = tiny(8).encode("run run run run run run run run run").unwrap();
        assert_eq!(ids, vec![2, 7, 7, 7, 7, 7, 7, 3]);
    }

    #[test]
    fn empty_text_is_cls_sep() {
        assert_eq!(tiny(8).encode("  ").unwrap(), vec![2, 3]);
    }

    #[test]
    fn a_broken_file_is_a_clear_error() {
        let err = TextTokenizer::from_tokenizer_json(b"{\"model\": 3}", 8).unwrap_err();
        assert!(matches!(err, EmbedError::ModelInvalid(_)), "{err:?}");
        assert!(err.to_string().contains("tokenizer.json"), "{err}");
    }
}
