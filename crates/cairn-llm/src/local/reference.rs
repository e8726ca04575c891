//! candle-transformers' quantized Qwen2 and Llama: the reference cairn's decoder (`decoder.rs`)
//! is tested and measured against. Only tests and the benchmark link it (a dev-dependency: it
//! costs ~100 s of a cold build, at the end of its critical path). The benchmark includes this
//! file by path (`examples/llm-bench.rs`), so it names nothing of cairn's.

use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::{Device, Result, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};

/// candle-transformers' model of a GGUF file.
pub enum Reference {
    Qwen2(Box<quantized_qwen2::ModelWeights>),
    Llama(Box<quantized_llama::ModelWeights>),
}

impl Reference {
    /// The model in `path`, by its `general.architecture`.
    pub fn open(path: &Path) -> Result<Self> {
        let mut file = std::fs::File::open(path)?;
        let content = Content::read(&mut file)?;
        let architecture = match content.metadata.get("general.architecture") {
            Some(Value::String(name)) => name.clone(),
            _ => candle_core::bail!("{} names no architecture", path.display()),
        };
        match architecture.as_str() {
            "qwen2" => {
                Ok(Self::Qwen2(Box::new(quantized_qwen2::ModelWeights::from_gguf(content, &mut file, &Device::Cpu)?)))
            }
            "llama" => {
                Ok(Self::Llama(Box::new(quantized_llama::ModelWeights::from_gguf(content, &mut file, &Device::Cpu)?)))
            }
            other => candle_core::bail!("no reference model for `{other}`"),
        }
    }

    /// The logits of the token after `tokens`, which sit at `position` onwards.
    pub fn logits(&mut self, tokens: &[u32], position: usize) -> Result<Vec<f32>> {
        let input = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        let logits = match self {
            Self::Qwen2(model) => model.forward(&input, position)?,
            Self::Llama(model) => model.forward(&input, position)?,
        };
        logits.squeeze(0)?.to_dtype(candle_core::DType::F32)?.to_vec1()
    }
}
