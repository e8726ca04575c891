//! A BERT-family sentence model read from a directory of Hugging Face files.

use std::path::{Path, PathBuf};

use crate::bert::{Bert, BertConfig};
use crate::files::REQUIRED_FILES;
use crate::gemma::{Gemma, GemmaConfig};
use crate::safetensors::Tensors;
use crate::second::Claim;
use crate::tokenizer::TextTokenizer;
use crate::{EmbedError, Embedder};

/// Tokens per text when the model directory does not say (sentence-transformers' default for
/// MiniLM); longer texts are truncated.
const DEFAULT_MAX_TOKENS: usize = 256;

pub struct LocalModel {
    id: String,
    tokenizer: TextTokenizer,
    encoder: Encoder,
    /// Put before each query / each passage (e5's `query: ` and `passage: `).
    query_prefix: Option<String>,
    passage_prefix: Option<String>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel").field("id", &self.id).finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Load the model in `dir`; says which file is missing or broken when it cannot.
    pub fn load(dir: &Path) -> Result<LocalModel, EmbedError> {
        let read = |name: &str| -> Result<Vec<u8>, EmbedError> {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    EmbedError::ModelMissing { dir: dir.display().to_string(), missing: name.to_owned() }
                }
                _ => EmbedError::Io(format!("cannot read {}: {e}", path.display())),
            })
        };
        let config_bytes = read("config.json")?;
        let (tokenizer, encoder) = if model_type(&config_bytes).as_deref() == Some("gemma3_text") {
            let config = GemmaConfig::from_json(&config_bytes)?;
            let max_tokens = max_seq_length(dir).unwrap_or(config.max_tokens()).min(config.max_tokens());
            // Gemma's tokenizer has one token past the table: `<image_soft_token>`, the
            // multimodal models' image placeholder, which the encoder drops.
            let tokenizer = tokenizer_within(&read("tokenizer.json")?, max_tokens, config.vocab_size + 1)?;
            let dense = crate::gemma::DENSE_FILES.iter().map(|f| read(f)).collect::<Result<Vec<_>, _>>()?;
            (tokenizer, Encoder::Gemma(Gemma::load(config, &Tensors::parse(&read("model.safetensors")?)?, &dense)?))
        } else {
            let config = BertConfig::from_json(&config_bytes)?;
            let max_tokens = max_seq_length(dir)
                .unwrap_or(DEFAULT_MAX_TOKENS)
                .min(config.max_position_embeddings - config.position_offset);
            let tokenizer = tokenizer_within(&read("tokenizer.json")?, max_tokens, config.vocab_size)?;
            (tokenizer, Encoder::Bert(Bert::load(config, &Tensors::parse(&read("model.safetensors")?)?)?))
        };
        let id = model_id(dir, &config_bytes);
        let (query_prefix, passage_prefix) = prefixes(dir);
        tracing::info!(model = %id, dir = %dir.display(), ?query_prefix, ?passage_prefix, "embedding model loaded");
        Ok(LocalModel { id, tokenizer, encoder, query_prefix, passage_prefix })
    }

    /// The prompts put before queries and passages, if the model has them.
    pub fn prefixes(&self) -> (Option<&str>, Option<&str>) {
        (self.query_prefix.as_deref(), self.passage_prefix.as_deref())
    }

    /// Vector length.
    /// Bytes of the word table held in memory: most of a multilingual model's resident size
    /// (see `word_table.rs`).
    pub fn word_table_bytes(&self) -> usize {
        self.encoder.word_table_bytes()
    }

    pub fn dims(&self) -> usize {
        self.encoder.dims()
    }

    /// Token ids of a text, special tokens included, truncated to the model's sequence length
    /// (for tests and diagnostics).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        self.tokenizer.encode(text)
    }

    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.embed_prefixed(None, text, false)
    }

    /// `prefix` then `text`. `parallel`: a query, which someone waits for; short ones use both
    /// cores (the same vector either way). The second thread is claimed first, so that it
    /// wakes while the text is tokenised.
    fn embed_prefixed(&self, prefix: Option<&str>, text: &str, parallel: bool) -> Result<Vec<f32>, EmbedError> {
        let second = if parallel { crate::second::claim() } else { None };
        let ids = match prefix {
            None => self.tokenizer.encode(text)?,
            Some(prefix) => self.tokenizer.encode(&format!("{prefix}{text}"))?,
        };
        debug_assert!(ids.len() <= self.encoder.max_positions());
        Ok(self.encoder.embed(&ids, second))
    }
}

impl Embedder for LocalModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_with(self.passage_prefix.as_deref(), texts, false)
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_with(self.query_prefix.as_deref(), texts, true)
    }

    fn embed_queries_alone(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_with(self.query_prefix.as_deref(), texts, false)
    }
}

impl LocalModel {
    fn embed_with(&self, prefix: Option<&str>, texts: &[&str], parallel: bool) -> Result<Vec<Vec<f32>>, EmbedError> {
        texts.iter().map(|t| self.embed_prefixed(prefix, t, parallel)).collect()
    }
}

/// The networks a model directory can hold.
enum Encoder {
    /// BERT, RoBERTa, XLM-R, nomic-bert.
    Bert(Bert),
    /// EmbeddingGemma.
    Gemma(Gemma),
}

impl Encoder {
    fn dims(&self) -> usize {
        match self {
            Encoder::Bert(bert) => bert.hidden_size(),
            Encoder::Gemma(gemma) => gemma.dims(),
        }
    }

    fn max_positions(&self) -> usize {
        match self {
            Encoder::Bert(bert) => bert.max_positions(),
            Encoder::Gemma(gemma) => gemma.max_positions(),
        }
    }

    fn word_table_bytes(&self) -> usize {
        match self {
            Encoder::Bert(bert) => bert.word_table_bytes(),
            Encoder::Gemma(gemma) => gemma.word_table_bytes(),
        }
    }

    fn embed(&self, ids: &[u32], second: Option<Claim>) -> Vec<f32> {
        match self {
            Encoder::Bert(bert) => bert.embed(ids, second),
            Encoder::Gemma(gemma) => gemma.embed(ids, second),
        }
    }
}

/// `config.json`'s `model_type`, which says which network the directory holds.
fn model_type(config: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(config).ok()?;
    value["model_type"].as_str().map(str::to_owned)
}

/// The tokenizer, cut at `max_tokens`, checked to give no id past the model's table.
fn tokenizer_within(json: &[u8], max_tokens: usize, vocab_size: usize) -> Result<TextTokenizer, EmbedError> {
    let tokenizer = TextTokenizer::from_tokenizer_json(json, max_tokens)?;
    if tokenizer.vocab_size() > vocab_size {
        return Err(EmbedError::ModelInvalid(format!(
            "tokenizer.json has {} tokens but config.json says vocab_size {vocab_size}",
            tokenizer.vocab_size()
        )));
    }
    Ok(tokenizer)
}

/// The model's query and passage prompts: from cairn's manifest (written by `cairn model
/// install` from its catalogue), else sentence-transformers' `config_sentence_transformers.json`
/// `prompts` (`query`, and `passage` or `document`).
fn prefixes(dir: &Path) -> (Option<String>, Option<String>) {
    if let Some(m) = crate::install::Manifest::read(dir)
        && (m.query_prefix.is_some() || m.passage_prefix.is_some())
    {
        return (m.query_prefix, m.passage_prefix);
    }
    let Some(value) = std::fs::read(dir.join("config_sentence_transformers.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    else {
        return (None, None);
    };
    let prompt = |names: &[&str]| {
        names.iter().find_map(|n| value["prompts"][n].as_str()).filter(|p| !p.is_empty()).map(str::to_owned)
    };
    (prompt(&["query"]), prompt(&["passage", "document"]))
}

/// `sentence_bert_config.json`'s `max_seq_length`, when the directory has one.
fn max_seq_length(dir: &Path) -> Option<usize> {
    let bytes = std::fs::read(dir.join("sentence_bert_config.json")).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value["max_seq_length"].as_u64().and_then(|n| usize::try_from(n).ok()).filter(|&n| n >= 2)
}

/// The id vectors are stored under: the installed model's name (from the manifest `cairn
/// model install` writes), else the directory name plus a hash of its config, so pointing
/// cairn at another model re-embeds.
fn model_id(dir: &Path, config: &[u8]) -> String {
    if let Some(manifest) = crate::install::Manifest::read(dir) {
        return manifest.id;
    }
    use sha2::Digest;
    let hash = sha2::Sha256::digest(config);
    let name = dir.file_name().map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    format!("local:{name}:{}", hex::encode(&hash[..4]))
}

/// The id a model directory's vectors are stored under, without loading the weights.
pub fn local_model_id(dir: &Path) -> String {
    let config = std::fs::read(dir.join("config.json")).unwrap_or_default();
    model_id(dir, &config)
}

/// Whether `dir` holds every file a model needs (a cheap check before loading).
pub fn is_model_dir(dir: &Path) -> bool {
    REQUIRED_FILES.iter().all(|f| dir.join(f).is_file())
}

/// The first missing file of a model directory.
pub fn missing_file(dir: &Path) -> Option<PathBuf> {
    REQUIRED_FILES.iter().map(|f| dir.join(f)).find(|p| !p.is_file())
}
