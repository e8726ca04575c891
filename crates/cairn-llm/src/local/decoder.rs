//! The decoder forward pass of the Llama family as cairn runs it: Qwen2 (Qwen2.5,
//! Qwen2.5-Coder) and Llama (SmolLM2, Llama 3), over candle's quantized kernels, shaped for
//! decoding on a small CPU. The two architectures differ only in what the GGUF says (`Config`):
//! Qwen2 adds biases to the query, key and value projections and rotates the halves of each
//! head (NeoX RoPE); Llama has no biases and rotates interleaved pairs (llama.cpp's converter
//! permuted its query and key weights for that). candle-transformers' `quantized_qwen2` and
//! `quantized_llama` compute the same functions (the tests below compare the logits); this one
//! differs where they cost memory or time on a 2-core machine (docs/benchmarks/llm.md), and
//! keeps candle-transformers (100 s of a cold build, at the end of its critical path) out of
//! the binary:
//!
//! - The token embedding stays quantized: a token's row is dequantized when it is looked up,
//!   and the same tensor is the output layer where the model ties them (Qwen2.5, SmolLM2).
//!   candle's keeps an f32 copy of the table (933 MB for Qwen2.5-1.5B) and reads the quantized
//!   one a second time.
//! - The KV cache is allocated once per call, in blocks, and written in place; candle's
//!   concatenates the whole cache with every token (copying ~60 MB per token at 2k tokens).
//! - Grouped-query attention reads each key and value head once: the query heads that share a
//!   KV head are stacked into one matrix, instead of copying the KV heads over.
//!
//! Its logits are candle's, to the noise of candle's own kernel paths (the tests below).

use candle_core::quantized::{QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, Module, Result, Tensor};
use std::sync::Arc;

/// The KV cache grows by this many positions at a time.
const CACHE_BLOCK: usize = 1024;

/// The shape of a model, from its GGUF's metadata (keys prefixed by its architecture's name,
/// as llama.cpp writes them).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    n_head: usize,
    n_kv_head: usize,
    width: usize,
    context: usize,
    blocks: usize,
    rms_eps: f64,
    rope_base: f32,
    rope: Rope,
}

/// How RoPE pairs a head's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rope {
    /// Dimension i with i + head_dim / 2 (GPT-NeoX's layout; Qwen2).
    Halves,
    /// Dimension 2i with 2i + 1 (Meta's layout, which llama.cpp's converter keeps for Llama).
    Interleaved,
}

impl Config {
    /// The metadata of `architecture` (`qwen2` or `llama`); `None` for another architecture.
    pub(crate) fn from_gguf(content: &gguf_file::Content, architecture: &str) -> Option<Result<Self>> {
        let rope = match architecture {
            "qwen2" => Rope::Halves,
            "llama" => Rope::Interleaved,
            _ => return None,
        };
        Some(Self::read(content, architecture, rope))
    }

    fn read(content: &gguf_file::Content, architecture: &str, rope: Rope) -> Result<Self> {
        let value = |key: &str| -> Result<&gguf_file::Value> {
            let key = format!("{architecture}.{key}");
            content.metadata.get(&key).ok_or_else(|| candle_core::Error::Msg(format!("no {key} in the GGUF")))
        };
        let count = |key: &str| -> Result<usize> { Ok(value(key)?.to_u32()? as usize) };
        let n_head = count("attention.head_count")?;
        let width = count("embedding_length")?;
        let config = Self {
            n_head,
            // A GGUF without it has one KV head per query head (no grouped-query attention).
            n_kv_head: count("attention.head_count_kv").unwrap_or(n_head),
            width,
            context: count("context_length")?,
            blocks: count("block_count")?,
            rms_eps: f64::from(value("attention.layer_norm_rms_epsilon")?.to_f32()?),
            rope_base: value("rope.freq_base").and_then(gguf_file::Value::to_f32).unwrap_or(10_000.0),
            rope,
        };
        // Checked before anything divides by them: a broken file is an error, not a panic.
        let kv = config.n_kv_head;
        if n_head == 0 || kv == 0 || !width.is_multiple_of(n_head) || !n_head.is_multiple_of(kv) {
            candle_core::bail!("{n_head} heads ({kv} KV heads) do not divide a width of {width}");
        }
        let head_dim = config.head_dim();
        // Partial rotary embeddings (RoPE over part of each head) are another model: refuse it.
        if let Ok(rotated) = count("rope.dimension_count")
            && rotated != head_dim
        {
            candle_core::bail!("RoPE over {rotated} of {head_dim} dimensions per head is not supported");
        }
        Ok(config)
    }

    fn head_dim(&self) -> usize {
        self.width / self.n_head
    }
}

/// RMSNorm with its weight dequantized (it is a vector of the model's width).
struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    fn from_qtensor(weight: QTensor, eps: f64) -> Result<Self> {
        Ok(Self { weight: weight.dequantize(&Device::Cpu)?, eps: eps as f32 })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        candle_nn::ops::rms_norm(x, &self.weight, self.eps)
    }
}

/// The query, key and value projections' biases (Qwen2 has them, Llama does not).
struct Biases {
    q: Tensor,
    k: Tensor,
    v: Tensor,
}

struct Layer {
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    biases: Option<Biases>,
    wo: QMatMul,
    attention_norm: RmsNorm,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
    ffn_norm: RmsNorm,
    /// `(n_kv_head, capacity, head_dim)` each; positions past the sequence's length are unused.
    keys: Option<Tensor>,
    values: Option<Tensor>,
}

/// The token embedding: quantized rows looked up one by one, or (for a width the quantization
/// blocks do not divide) a dequantized table.
enum Embedding {
    Quantized(Arc<QTensor>),
    Dense(Tensor),
}

impl Embedding {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Self::Quantized(table) => table.embedding(ids),
            Self::Dense(table) => {
                let (b, t) = ids.dims2()?;
                table.index_select(&ids.flatten_all()?, 0)?.reshape((b, t, table.dim(1)?))
            }
        }
    }
}

pub(crate) struct Decoder {
    embedding: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    output: QMatMul,
    cos: Tensor,
    sin: Tensor,
    shape: Shape,
    /// Positions held in the KV cache.
    cached: usize,
}

impl Decoder {
    /// The weights of `config`'s model from its GGUF, with RoPE tables for at most
    /// `max_context` positions.
    pub(crate) fn from_gguf<R: std::io::Seek + std::io::Read>(
        config: &Config,
        content: &gguf_file::Content,
        reader: &mut R,
        max_context: usize,
    ) -> Result<Self> {
        let device = &Device::Cpu;
        let eps = config.rms_eps;
        let mut tensor = |name: &str| content.tensor(reader, name, device);

        let table = Arc::new(tensor("token_embd.weight")?);
        let embedding = if config.width.is_multiple_of(table.dtype().block_size()) {
            Embedding::Quantized(Arc::clone(&table))
        } else {
            Embedding::Dense(table.dequantize(device)?)
        };
        // Tied embeddings (no `output.weight`): the table is the output layer too.
        let output = match tensor("output.weight") {
            Ok(own) => QMatMul::from_qtensor(own)?,
            Err(_) => QMatMul::from_arc(table)?,
        };
        let norm = RmsNorm::from_qtensor(tensor("output_norm.weight")?, eps)?;
        let mut layers = Vec::with_capacity(config.blocks);
        for i in 0..config.blocks {
            let mut weight = |what: &str| tensor(&format!("blk.{i}.{what}"));
            let biases = match weight("attn_q.bias") {
                Ok(q) => Some(Biases {
                    q: q.dequantize(device)?,
                    k: weight("attn_k.bias")?.dequantize(device)?,
                    v: weight("attn_v.bias")?.dequantize(device)?,
                }),
                Err(_) => None,
            };
            layers.push(Layer {
                wq: QMatMul::from_qtensor(weight("attn_q.weight")?)?,
                wk: QMatMul::from_qtensor(weight("attn_k.weight")?)?,
                wv: QMatMul::from_qtensor(weight("attn_v.weight")?)?,
                biases,
                wo: QMatMul::from_qtensor(weight("attn_output.weight")?)?,
                attention_norm: RmsNorm::from_qtensor(weight("attn_norm.weight")?, eps)?,
                gate: QMatMul::from_qtensor(weight("ffn_gate.weight")?)?,
                up: QMatMul::from_qtensor(weight("ffn_up.weight")?)?,
                down: QMatMul::from_qtensor(weight("ffn_down.weight")?)?,
                ffn_norm: RmsNorm::from_qtensor(weight("ffn_norm.weight")?, eps)?,
                keys: None,
                values: None,
            });
        }
        let head_dim = config.head_dim();
        let (cos, sin) = rotary_tables(head_dim, config.rope_base, config.context.min(max_context.max(1)))?;
        let shape = Shape { n_head: config.n_head, n_kv_head: config.n_kv_head, head_dim, rope: config.rope };
        Ok(Self { embedding, layers, norm, output, cos, sin, shape, cached: 0 })
    }

    /// The logits of the token after `tokens`, which sit at `position` onwards: 0 starts a new
    /// sequence, the cached length continues it, and anything between keeps the cache before
    /// `position` (a prompt that starts like the last one) and writes over the rest.
    pub(crate) fn forward(&mut self, tokens: &[u32], position: usize) -> Result<Tensor> {
        if position > self.cached {
            candle_core::bail!("position {position} does not continue the {} cached", self.cached);
        }
        let seq = tokens.len();
        let end = position + seq;
        if end > self.cos.dim(0)? {
            candle_core::bail!("position {end} is past the context of {}", self.cos.dim(0)?);
        }
        let ids = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        let mut x = self.embedding.forward(&ids)?;
        let mask = (seq > 1).then(|| causal_mask(seq, position)).transpose()?;
        let cos = self.cos.narrow(0, position, seq)?;
        let sin = self.sin.narrow(0, position, seq)?;
        for layer in &mut self.layers {
            let attended =
                layer.attend(&layer.attention_norm.forward(&x)?, &self.shape, position, (&cos, &sin), mask.as_ref())?;
            x = (attended + x)?;
            let h = layer.ffn_norm.forward(&x)?;
            let mlp =
                layer.down.forward(&(candle_nn::ops::silu(&layer.gate.forward(&h)?)? * layer.up.forward(&h)?)?)?;
            x = (mlp + x)?;
        }
        self.cached = end;
        let last = self.norm.forward(&x.narrow(1, seq - 1, 1)?)?;
        self.output.forward(&last)?.squeeze(1)?.squeeze(0)
    }
}

struct Shape {
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    rope: Rope,
}

impl Layer {
    /// Self-attention of `h` (`(1, seq, width)`) over the cache and itself.
    fn attend(
        &mut self,
        hidden: &Tensor,
        shape: &Shape,
        position: usize,
        (cos, sin): (&Tensor, &Tensor),
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let (_, seq, width) = hidden.dims3()?;
        let Shape { n_head, n_kv_head, head_dim, rope } = *shape;
        let heads = |t: Tensor, n: usize| t.reshape((1, seq, n, head_dim))?.transpose(1, 2)?.contiguous();
        let project = |w: &QMatMul, bias: Option<&Tensor>| match bias {
            Some(bias) => w.forward(hidden)?.broadcast_add(bias),
            None => w.forward(hidden),
        };
        let biases = self.biases.as_ref();
        let query = heads(project(&self.wq, biases.map(|b| &b.q))?, n_head)?;
        let key = heads(project(&self.wk, biases.map(|b| &b.k))?, n_kv_head)?;
        let value = heads(project(&self.wv, biases.map(|b| &b.v))?, n_kv_head)?;
        let rotate = |t: &Tensor| match rope {
            Rope::Halves => candle_nn::rotary_emb::rope(t, cos, sin),
            Rope::Interleaved => candle_nn::rotary_emb::rope_i(t, cos, sin),
        };
        let query = rotate(&query)?;
        let key = rotate(&key)?;
        let end = position + seq;
        let keys = store(&mut self.keys, &key.squeeze(0)?, position)?;
        let values = store(&mut self.values, &value.squeeze(0)?, position)?;
        let keys = keys.narrow(1, 0, end)?;
        let values = values.narrow(1, 0, end)?;
        // The query heads that share a KV head, stacked: (n_kv_head, group × seq, head_dim).
        let group = n_head / n_kv_head;
        let query = query.reshape((n_kv_head, group * seq, head_dim))?;
        let scores = (query.matmul(&keys.t()?)? / (head_dim as f64).sqrt())?;
        let scores = match mask {
            Some(mask) => scores.reshape((n_kv_head, group, seq, end))?.broadcast_add(mask)?.reshape((
                n_kv_head,
                group * seq,
                end,
            ))?,
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let y = weights.matmul(&values)?; // (n_kv_head, group × seq, head_dim)
        let y = y.reshape((n_head, seq, head_dim))?.transpose(0, 1)?.reshape((1, seq, width))?;
        self.wo.forward(&y)
    }
}

/// Write `fresh` (`(n_kv_head, seq, head_dim)`) into `cache` at `position`, growing it by whole
/// blocks when it is full (a new sequence at position 0 reuses it). Returns the cache.
fn store(cache: &mut Option<Tensor>, fresh: &Tensor, position: usize) -> Result<Tensor> {
    let (heads, seq, head_dim) = fresh.dims3()?;
    let needed = position + seq;
    let capacity = cache.as_ref().map_or(Ok(0), |c| c.dim(1))?;
    if needed > capacity {
        let grown = needed.div_ceil(CACHE_BLOCK) * CACHE_BLOCK;
        let bigger = Tensor::zeros((heads, grown, head_dim), DType::F32, &Device::Cpu)?;
        if let Some(old) = cache.as_ref().filter(|_| position > 0) {
            bigger.slice_set(&old.narrow(1, 0, position)?.contiguous()?, 1, 0)?;
        }
        *cache = Some(bigger);
    }
    let cache = cache.as_ref().expect("allocated above");
    cache.slice_set(&fresh.contiguous()?, 1, position)?;
    Ok(cache.clone())
}

/// The additive causal mask of `seq` new positions after `position` cached ones: `(seq, end)`,
/// 0 where a position may look, -inf where it may not.
fn causal_mask(seq: usize, position: usize) -> Result<Tensor> {
    let end = position + seq;
    let mask: Vec<f32> =
        (0..seq).flat_map(|i| (0..end).map(move |j| if j <= position + i { 0.0 } else { f32::NEG_INFINITY })).collect();
    Tensor::from_vec(mask, (seq, end), &Device::Cpu)
}

/// RoPE's cosine and sine tables for `positions` positions.
fn rotary_tables(head_dim: usize, base: f32, positions: usize) -> Result<(Tensor, Tensor)> {
    let inverse: Vec<f32> = (0..head_dim).step_by(2).map(|i| 1.0 / base.powf(i as f32 / head_dim as f32)).collect();
    let inverse = Tensor::new(inverse.as_slice(), &Device::Cpu)?;
    let angles = Tensor::arange(0, positions as u32, &Device::Cpu)?
        .to_dtype(DType::F32)?
        .reshape((positions, 1))?
        .broadcast_mul(&inverse.unsqueeze(0)?)?;
    Ok((angles.cos()?, angles.sin()?))
}

#[cfg(test)]
mod tests {
    use super::super::catalogue::{LocalModelSpec, QWEN25_CODER_0_5B, QWEN25_CODER_1_5B, SMOLLM2_135M};
    use super::super::model::load;
    use super::super::reference::Reference;
    use super::*;

    #[test]
    fn the_causal_mask_lets_a_position_see_the_cache_and_itself() {
        let mask = causal_mask(2, 3).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(mask[0], [0.0, 0.0, 0.0, 0.0, f32::NEG_INFINITY]);
        assert_eq!(mask[1], [0.0; 5]);
    }

    /// Compare cairn's decoder with candle-transformers' model of the same file, through a
    /// prompt taken in chunks and two decoded tokens (the cache written in place, grouped
    /// heads stacked). Skipped without the file (`scripts/install-test-deps.sh llm llm-qwen`).
    fn logits_match_the_reference(models: &[LocalModelSpec], first_token: u32) {
        let Some(path) = models.iter().find_map(super::super::test_model_file) else {
            return;
        };
        let mut ours = load(&path, 256, None).unwrap().weights;
        let mut theirs = Reference::open(&path).unwrap();
        let tokens: Vec<u32> = (0..14).map(|i| first_token + i * 37).collect();
        let steps: [(usize, usize); 5] = [(0, 1), (1, 9), (9, 12), (12, 13), (13, 14)];
        for (from, to) in steps {
            let a = ours.forward(&tokens[from..to], from).unwrap();
            let b = theirs.logits(&tokens[from..to], from).unwrap();
            let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = a.iter().zip(&b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            // Not bit for bit: candle quantizes activations per kernel path, so candle's own
            // Qwen2 differs from itself by ~2.5 % of the largest logit between a prefill and
            // the same tokens one by one. The same next token, and no more than that noise.
            assert_eq!(
                super::super::provider::argmax_of(&a),
                super::super::provider::argmax_of(&b),
                "tokens {from}..{to}"
            );
            assert!(worst <= 0.05 * scale.max(1.0), "tokens {from}..{to}: differ by {worst} (scale {scale})");
        }
    }

    #[test]
    fn logits_match_candles_qwen2() {
        logits_match_the_reference(&[QWEN25_CODER_0_5B, QWEN25_CODER_1_5B], 9_000);
    }

    /// SmolLM2 is a Llama: no biases, interleaved RoPE, its own output layer or a tied one.
    #[test]
    fn logits_match_candles_llama() {
        logits_match_the_reference(&[SMOLLM2_135M], 2_000);
    }

    #[test]
    fn the_architecture_decides_biases_and_rope_layout() {
        let content = gguf_file::Content {
            magic: gguf_file::VersionedMagic::GgufV3,
            metadata: std::collections::HashMap::new(),
            tensor_infos: std::collections::HashMap::new(),
            tensor_data_offset: 0,
        };
        assert!(Config::from_gguf(&content, "gemma").is_none());
        let missing = Config::from_gguf(&content, "llama").unwrap().unwrap_err().to_string();
        assert!(missing.contains("llama.attention.head_count"), "{missing}");
    }
}
