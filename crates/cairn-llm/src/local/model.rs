//! A GGUF file opened as a model: its metadata checked, its weights loaded into cairn's decoder
//! (`decoder.rs`), its tokenizer built from its own vocabulary.

use std::io::{Seek, SeekFrom};
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::tokenizer::TokenizerFromGguf;
use tokenizers::Tokenizer;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;

use super::decoder::{Config, Decoder};
use super::template::ChatTemplate;
use crate::LlmError;

/// A model's forward pass: the logits of the token after `tokens`, which sit at `position`
/// onwards. The weights hold their own KV cache; position 0 starts a new sequence. cairn's
/// decoder is one; the benchmark and the tests plug candle-transformers' models in beside it
/// to compare the two (`LocalProvider::open_with_weights`).
#[doc(hidden)]
pub trait Forward: Send {
    fn forward(&mut self, tokens: &[u32], position: usize) -> candle_core::Result<Vec<f32>>;
    /// Whether a sequence may go on from any position up to the cached length, the cache before
    /// it kept (a new prompt that starts like the last one reuses its keys and values). The
    /// default: only from 0 (a new sequence) or from where the cache ends.
    fn resumes_anywhere(&self) -> bool {
        false
    }
}

impl Forward for Decoder {
    fn forward(&mut self, tokens: &[u32], position: usize) -> candle_core::Result<Vec<f32>> {
        Decoder::forward(self, tokens, position)?.to_dtype(candle_core::DType::F32)?.to_vec1()
    }

    fn resumes_anywhere(&self) -> bool {
        true
    }
}

pub(crate) type Weights = Box<dyn Forward>;

/// What a model needs besides its weights.
pub(crate) struct Loaded {
    pub weights: Weights,
    pub tokenizer: Tokenizer,
    pub template: ChatTemplate,
    /// Tokens that end the answer: the GGUF's end of sequence and the family's end of turn.
    pub stop_tokens: Vec<u32>,
    /// The context the model was trained with.
    pub context_length: usize,
}

fn model_file_error(path: &Path, what: impl std::fmt::Display) -> LlmError {
    LlmError::ModelFile(format!(
        "{} {what}; install the model again (cairn llm use local --model NAME [--from FILE])",
        path.display()
    ))
}

/// Open `path`, with a KV cache of at most `max_context` positions, on cairn's decoder or, when
/// given, on `weights` (another forward pass of the same file, to compare the two). Every
/// failure is an `LlmError::ModelFile` naming the file and the fix.
pub(crate) fn load(path: &Path, max_context: usize, weights: Option<Weights>) -> Result<Loaded, LlmError> {
    let mut file = std::fs::File::open(path).map_err(|e| model_file_error(path, format!("cannot be read: {e}")))?;
    let content = Content::read(&mut file).map_err(|e| model_file_error(path, format!("is not a GGUF model: {e}")))?;
    check_tensor_extents(&content, &mut file).map_err(|what| model_file_error(path, what))?;
    let architecture = string_value(&content, "general.architecture").unwrap_or_default().to_owned();
    let jinja = string_value(&content, "tokenizer.chat_template");
    let template = ChatTemplate::detect(&architecture, jinja).ok_or_else(|| {
        model_file_error(path, format!("has no chat template cairn knows (architecture `{architecture}`)"))
    })?;
    let context_length = content
        .metadata
        .get(&format!("{architecture}.context_length"))
        .and_then(|v| v.to_u32().ok())
        .map_or(4096, |n| n as usize);
    let tokenizer =
        tokenizer(&content).map_err(|e| model_file_error(path, format!("has no usable vocabulary: {e}")))?;
    let mut stop_tokens: Vec<u32> = template.end_of_turn().iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
    if let Some(eos) = content.metadata.get("tokenizer.ggml.eos_token_id").and_then(|v| v.to_u32().ok()) {
        stop_tokens.push(eos);
    }
    let Some(config) = Config::from_gguf(&content, &architecture) else {
        return Err(model_file_error(
            path,
            format!("is a `{architecture}` model; cairn runs qwen2 (Qwen2.5) and llama (SmolLM2, Llama) models"),
        ));
    };
    let unloadable = |e: candle_core::Error| model_file_error(path, format!("has weights cairn cannot load: {e}"));
    let decoder = || -> Result<Weights, LlmError> {
        let config = config.map_err(unloadable)?;
        let positions = max_context.min(context_length);
        Ok(Box::new(Decoder::from_gguf(&config, &content, &mut file, positions).map_err(unloadable)?))
    };
    let weights = weights.map_or_else(decoder, Ok)?;
    Ok(Loaded { weights, tokenizer, template, stop_tokens, context_length })
}

fn string_value<'c>(content: &'c Content, key: &str) -> Option<&'c str> {
    match content.metadata.get(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// Every tensor lies inside the file: a truncated download is named as such, before candle
/// reads past its end.
fn check_tensor_extents(content: &Content, file: &mut std::fs::File) -> Result<(), String> {
    let file_size = file.seek(SeekFrom::End(0)).map_err(|e| format!("cannot be read: {e}"))?;
    let mut needed = content.tensor_data_offset;
    for info in content.tensor_infos.values() {
        let dtype = info.ggml_dtype;
        let bytes = (info.shape.elem_count() / dtype.block_size()) as u64 * dtype.type_size() as u64;
        needed = needed.max(content.tensor_data_offset + info.offset + bytes);
    }
    if file_size < needed {
        return Err(format!("is truncated: {file_size} bytes where its tensors need {needed}"));
    }
    if content.tensor_infos.is_empty() {
        return Err("holds no tensors".to_owned());
    }
    Ok(())
}

/// The tokenizer of the GGUF's vocabulary and merges. Markers in a message's text are
/// tokenized as text (`encode_special_tokens`): only the template places special tokens.
fn tokenizer(content: &Content) -> candle_core::Result<Tokenizer> {
    let mut tokenizer = Tokenizer::from_gguf(content)?;
    // candle builds the GPT-2 pre-tokenizer for vocabularies it does not name (SmolLM2's
    // `smollm`), which adds a space before every text; their tokenizer.json adds none.
    let pre = string_value(content, "tokenizer.ggml.pre").unwrap_or("gpt2");
    if !matches!(pre, "qwen2" | "llama3" | "smaug-bpe" | "lfm2") {
        tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    }
    tokenizer.set_encode_special_tokens(true);
    Ok(tokenizer)
}
