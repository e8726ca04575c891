//! The local provider: a small instruction model from a GGUF file, run on the CPU with cairn's
//! decoder for the Qwen2 and Llama architectures over candle's quantized kernels (pure Rust;
//! llama.cpp would add a C++ build of several minutes to every cold build).
//!
//! - `catalogue`: the models cairn knows, each pinned by sha256, with measured figures.
//! - `install_from_file`, `install_download`: a verified copy into the models dir.
//! - `LocalProvider` (feature `local`): the model loaded once; each chat renders the family's
//!   chat template, decodes greedily at temperature 0, stops at end of turn or `max_tokens`, and
//!   with a JSON request keeps the answer valid JSON and stops when its top-level value closes.
//!
//! The catalogue and the installs are always built: the default `cairn` binary lists, downloads
//! and checks the models without candle, and runs them in `cairn-llm-worker` (`crate::worker`),
//! which is the only binary that carries the forward pass.

mod catalogue;
#[cfg(feature = "local")]
mod decoder;
mod install;
#[cfg(feature = "local")]
mod json;
#[cfg(feature = "local")]
mod model;
#[cfg(feature = "local")]
mod provider;
#[cfg(all(test, feature = "local"))]
mod reference;
#[cfg(feature = "local")]
mod sampler;
#[cfg(feature = "local")]
mod template;

pub use catalogue::{
    LocalMeasured, LocalModelSpec, QWEN25_CODER_0_5B, QWEN25_CODER_1_5B, SMOLLM2_135M, catalogue, default_model, find,
};
#[cfg(feature = "remote")]
pub use install::install_download;
pub use install::{install_from_file, installed_path};
#[cfg(feature = "local")]
pub use json::JsonPrefix;
#[cfg(feature = "local")]
pub use model::Forward;
#[cfg(feature = "local")]
pub use provider::{LocalOptions, LocalProvider, LocalTimings, THREADS_ENV};
#[cfg(feature = "local")]
pub use template::{ChatTemplate, Piece};

/// Where tests and the benchmark find a model's GGUF: `CAIRN_TEST_LLM_DIR`, else the copies
/// `scripts/install-test-deps.sh llm` (SmolLM2) and `llm-qwen` put in `target/test-deps/llm`.
#[doc(hidden)]
pub fn test_model_file(spec: &LocalModelSpec) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("CAIRN_TEST_LLM_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/llm"),
        std::path::PathBuf::from,
    );
    installed_path(spec, &dir)
}
