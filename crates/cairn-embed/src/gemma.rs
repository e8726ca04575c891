//! EmbeddingGemma-300m (Google, Gemma Terms): a Gemma 3 decoder run as a bidirectional
//! encoder, then two dense layers, as sentence-transformers runs the model. Multilingual
//! (100+ languages), 768 dimensions. Its files are the hub's sentence-transformers folder
//! as they are: `config.json` (`model_type` `gemma3_text`), `tokenizer.json` (BPE with byte
//! fallback, `<bos> … <eos>`), `model.safetensors`, `2_Dense/` and `3_Dense/`.
//!
//! The forward pass (Hugging Face's `Gemma3TextModel` with `use_bidirectional_attention`):
//! - the token's row of the table, times √hidden;
//! - per layer: RMSNorm, attention, RMSNorm, added back; RMSNorm, GeGLU MLP, RMSNorm, added
//!   back. Every RMSNorm scales by `1 + weight`;
//! - attention: several query heads share one key/value head (grouped-query attention);
//!   queries and keys are RMS-normed per head, then rotated (rotary positions, the head's two
//!   halves together; base 10,000 in the sliding-window layers, 1,000,000 in the global ones);
//!   scores scaled by `query_pre_attn_scalar^-½`, no mask (every token sees every token);
//! - the MLP: `down(gelu_tanh(gate(x)) · up(x))`;
//! - the final RMSNorm, the mean of every token's state (`<bos>` and `<eos>` too), the two
//!   dense layers (768 → 3,072 → 768, no bias), unit length.
//!
//! Texts are cut at the sliding window (512 tokens): within it a sliding layer sees every token
//! as a global one does, so no layer needs a mask; and a memory of 2,048 tokens (the model's
//! context) would take seconds to embed on two cores. Activations stay f32 (the model card
//! warns that f16 activations break it); the products' weights are kept in f16 like nomic's
//! and e5's (half the bytes a query streams), which the reference vectors' test bounds.
//! Its products, attention's included, are the BERT encoder's kernels ([`crate::bert`]).

use std::sync::Arc;

use crate::EmbedError;
use crate::bert::{
    Epilogue, Helper, KernelScratch, Kernels, Linear, Panels, Rope, Strided, StridedMut, THIN_ROWS, add_in_place,
    exp_nonpositive, linear, product, softmax, sum_by,
};
use crate::safetensors::Tensors;
use crate::second::Claim;
use crate::word_table::WordTable;

/// The prompts EmbeddingGemma was trained with for retrieval (its
/// `config_sentence_transformers.json`: `query`, `document`).
pub const QUERY_PREFIX: &str = "task: search result | query: ";
pub const PASSAGE_PREFIX: &str = "title: none | text: ";

/// The dense layers' files, in order, under the model's directory.
pub const DENSE_FILES: [&str; 2] = ["2_Dense/model.safetensors", "3_Dense/model.safetensors"];

/// Tokens per text: the sliding window (see the module's comment).
pub const MAX_TOKENS: usize = 512;

/// Whether the products' weights are kept in f16 (see the module's comment).
const HALF_WEIGHTS: bool = true;

/// What `config.json` says about the network.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct GemmaConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    pub rope_local_base_freq: f32,
    pub sliding_window: usize,
    pub query_pre_attn_scalar: f32,
    pub hidden_activation: String,
    /// `sliding_attention` or `full_attention`, one per layer.
    pub layer_types: Vec<String>,
    #[serde(default)]
    pub use_bidirectional_attention: bool,
}

impl GemmaConfig {
    /// `config.json`, checked to describe the encoder this module runs.
    pub fn from_json(bytes: &[u8]) -> Result<GemmaConfig, EmbedError> {
        let invalid = |why: String| EmbedError::ModelInvalid(format!("config.json: {why}"));
        let config: GemmaConfig = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        if !config.use_bidirectional_attention {
            return Err(invalid(
                "a causal Gemma (use_bidirectional_attention is not true) is not a sentence encoder".into(),
            ));
        }
        if config.hidden_activation != "gelu_pytorch_tanh" {
            return Err(invalid(format!("hidden_activation {}, expected gelu_pytorch_tanh", config.hidden_activation)));
        }
        if config.layer_types.len() != config.num_hidden_layers {
            return Err(invalid(format!(
                "{} layer_types for {} layers",
                config.layer_types.len(),
                config.num_hidden_layers
            )));
        }
        if let Some(other) =
            config.layer_types.iter().find(|t| !matches!(t.as_str(), "sliding_attention" | "full_attention"))
        {
            return Err(invalid(format!("layer type {other} (sliding_attention or full_attention expected)")));
        }
        let (heads, groups) = (config.num_attention_heads, config.num_key_value_heads);
        if heads == 0 || groups == 0 || !heads.is_multiple_of(groups) || !config.head_dim.is_multiple_of(2) {
            return Err(invalid(format!(
                "{heads} query heads over {groups} key/value heads of {} dimensions (a whole number of query \
                 heads per key/value head, and an even head for the rotary halves, expected)",
                config.head_dim
            )));
        }
        if config.hidden_size == 0 || config.vocab_size == 0 || config.sliding_window == 0 {
            return Err(invalid("hidden_size, vocab_size and sliding_window must not be 0".into()));
        }
        Ok(config)
    }

    /// Tokens per text the encoder takes (see [`MAX_TOKENS`]).
    pub fn max_tokens(&self) -> usize {
        MAX_TOKENS.min(self.sliding_window).min(self.max_position_embeddings)
    }

    fn queries_width(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }

    fn keys_width(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }
}

/// One RMSNorm's scale, `1 + weight`, computed once.
struct RmsNorm(Vec<f32>);

impl RmsNorm {
    fn new(weight: Vec<f32>) -> RmsNorm {
        RmsNorm(weight.into_iter().map(|w| 1.0 + w).collect())
    }

    /// Each row of `x` (rows as wide as the scale) divided by its root mean square, scaled.
    fn apply(&self, x: &mut [f32], eps: f32) {
        let width = self.0.len();
        for row in x.chunks_exact_mut(width) {
            let inv = 1.0 / (sum_by(row, |v| v * v) / width as f32 + eps).sqrt();
            for (v, g) in row.iter_mut().zip(&self.0) {
                *v = *v * inv * g;
            }
        }
    }
}

struct Layer {
    input_norm: RmsNorm,
    /// Queries, keys and values in one product: outputs `[q | k | v]`.
    qkv: Arc<Linear>,
    query_norm: RmsNorm,
    key_norm: RmsNorm,
    /// Global attention: the long rotary base.
    global: bool,
    attention_out: Arc<Linear>,
    post_attention_norm: RmsNorm,
    pre_mlp_norm: RmsNorm,
    /// The gate and up products in one: outputs `[gate | up]`.
    gate_up: Arc<Linear>,
    down: Arc<Linear>,
    post_mlp_norm: RmsNorm,
}

pub struct Gemma {
    config: GemmaConfig,
    word: WordTable,
    layers: Vec<Layer>,
    final_norm: RmsNorm,
    /// The sentence-transformers dense layers after the pooling, in order.
    dense: Vec<Arc<Linear>>,
    local_rope: Rope,
    global_rope: Rope,
}

/// Buffers reused across the layers of one forward pass.
#[derive(Default)]
struct Scratch {
    normed: Vec<f32>,
    qkv: Vec<f32>,
    scores: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    gate_up: Vec<f32>,
    hidden: Vec<f32>,
    kernel: Kernels,
    keys: Panels,
    values: Panels,
}

impl Gemma {
    /// The network from `model.safetensors` and the bytes of the dense layers' files
    /// ([`DENSE_FILES`], each holding `linear.weight`, `[outputs, inputs]`), in order.
    pub fn load(config: GemmaConfig, tensors: &Tensors<'_>, dense: &[Vec<u8>]) -> Result<Gemma, EmbedError> {
        let (h, inner, hd) = (config.hidden_size, config.intermediate_size, config.head_dim);
        let (qw, kw) = (config.queries_width(), config.keys_width());
        let get = |name: &str, shape: &[usize]| tensors.get(name, shape);
        let matrix = |name: &str, outputs: usize, inputs: usize| get(&format!("{name}.weight"), &[outputs, inputs]);
        let packed = |weights: &[f32], inputs: usize, outputs: usize| {
            Arc::new(Linear::unbiased(weights, inputs, outputs, HALF_WEIGHTS))
        };
        let product = |name: &str, outputs: usize, inputs: usize| {
            Ok::<_, EmbedError>(packed(&matrix(name, outputs, inputs)?, inputs, outputs))
        };
        let norm =
            |name: &str, width: usize| Ok::<_, EmbedError>(RmsNorm::new(get(&format!("{name}.weight"), &[width])?));
        let layers = (0..config.num_hidden_layers)
            .map(|l| {
                let p = format!("layers.{l}");
                let attention = |name: &str, outputs: usize| matrix(&format!("{p}.self_attn.{name}"), outputs, h);
                let qkv = [attention("q_proj", qw)?, attention("k_proj", kw)?, attention("v_proj", kw)?].concat();
                let mlp = |name: &str| matrix(&format!("{p}.mlp.{name}"), inner, h);
                let gate_up = [mlp("gate_proj")?, mlp("up_proj")?].concat();
                Ok(Layer {
                    input_norm: norm(&format!("{p}.input_layernorm"), h)?,
                    qkv: packed(&qkv, h, qw + 2 * kw),
                    query_norm: norm(&format!("{p}.self_attn.q_norm"), hd)?,
                    key_norm: norm(&format!("{p}.self_attn.k_norm"), hd)?,
                    global: config.layer_types[l] == "full_attention",
                    attention_out: product(&format!("{p}.self_attn.o_proj"), h, qw)?,
                    post_attention_norm: norm(&format!("{p}.post_attention_layernorm"), h)?,
                    pre_mlp_norm: norm(&format!("{p}.pre_feedforward_layernorm"), h)?,
                    gate_up: packed(&gate_up, h, 2 * inner),
                    down: product(&format!("{p}.mlp.down_proj"), h, inner)?,
                    post_mlp_norm: norm(&format!("{p}.post_feedforward_layernorm"), h)?,
                })
            })
            .collect::<Result<Vec<_>, EmbedError>>()?;
        let dense = dense_layers(dense, h)?;
        let positions = config.max_tokens();
        Ok(Gemma {
            word: WordTable::F16(tensors.get_f16("embed_tokens.weight", &[config.vocab_size, h])?),
            final_norm: norm("norm", h)?,
            layers,
            dense,
            local_rope: Rope::new(config.rope_local_base_freq, hd, positions),
            global_rope: Rope::new(config.rope_theta, hd, positions),
            config,
        })
    }

    /// Vector length: the last dense layer's outputs.
    pub(crate) fn word_table_bytes(&self) -> usize {
        self.word.bytes()
    }

    pub fn dims(&self) -> usize {
        self.dense.last().map_or(self.config.hidden_size, |d| d.outputs())
    }

    pub fn max_positions(&self) -> usize {
        self.config.max_tokens()
    }

    /// The sentence embedding of one token sequence. `second`: a query's second thread, as in
    /// [`crate::bert::Bert::embed`]; the same vector either way.
    pub fn embed(&self, ids: &[u32], second: Option<Claim>) -> Vec<f32> {
        let helper = second.filter(|_| ids.len() <= THIN_ROWS).map(Helper::new);
        let mut scratch = Scratch { kernel: Kernels { main: KernelScratch::default(), helper }, ..Scratch::default() };
        self.forward(ids, &mut scratch)
    }

    fn forward(&self, ids: &[u32], s: &mut Scratch) -> Vec<f32> {
        let h = self.config.hidden_size;
        // An id past the table (the tokenizer's image placeholder) has no row: dropped.
        let ids: Vec<u32> = ids.iter().copied().filter(|&id| (id as usize) < self.config.vocab_size).collect();
        let ids = &ids[..ids.len().min(self.max_positions())];
        let n = ids.len();
        if n == 0 {
            return vec![0.0; self.dims()];
        }
        // Gemma scales its token table by √hidden, rounded to f32 as upstream does.
        let scale = (h as f32).sqrt();
        let mut x = vec![0f32; n * h];
        for (row, &id) in x.chunks_exact_mut(h).zip(ids) {
            self.word.add_row(id as usize, h, |_| 0.0, row);
            for v in row.iter_mut() {
                *v *= scale;
            }
        }
        for layer in &self.layers {
            self.attention_block(layer, &mut x, n, s);
            self.mlp_block(layer, &mut x, n, s);
        }
        self.final_norm.apply(&mut x, self.config.rms_norm_eps);
        let mut pooled = vec![0f32; h];
        for row in x.chunks_exact(h) {
            add_in_place(&mut pooled, row);
        }
        for v in &mut pooled {
            *v /= n as f32;
        }
        for dense in &self.dense {
            let mut out = Vec::new();
            linear(dense, &pooled, 1, &mut out, &mut s.kernel, false);
            pooled = out;
        }
        crate::normalise(&mut pooled);
        pooled
    }

    /// `x += norm(attention(norm(x)))`.
    fn attention_block(&self, layer: &Layer, x: &mut [f32], n: usize, s: &mut Scratch) {
        let c = &self.config;
        let (hd, qw, kw) = (c.head_dim, c.queries_width(), c.keys_width());
        let width = qw + 2 * kw;
        s.normed.clear();
        s.normed.extend_from_slice(x);
        layer.input_norm.apply(&mut s.normed, c.rms_norm_eps);
        linear(&layer.qkv, &s.normed, n, &mut s.qkv, &mut s.kernel, false);
        let rope = if layer.global { &self.global_rope } else { &self.local_rope };
        for (position, row) in s.qkv.chunks_exact_mut(width).enumerate() {
            let (queries, rest) = row.split_at_mut(qw);
            layer.query_norm.apply(queries, c.rms_norm_eps);
            layer.key_norm.apply(&mut rest[..kw], c.rms_norm_eps);
            for head in queries.chunks_exact_mut(hd).chain(rest[..kw].chunks_exact_mut(hd)) {
                rope.rotate(head, position);
            }
        }
        let qkv = &s.qkv;
        s.scores.resize(n * n, 0.0);
        s.context.resize(n * qw, 0.0);
        let scale = 1.0 / c.query_pre_attn_scalar.sqrt();
        let per_group = c.num_attention_heads / c.num_key_value_heads;
        for group in 0..c.num_key_value_heads {
            let (key, value) = (qw + group * hd, qw + kw + group * hd);
            // Kᵀ and V of the group packed once for all its query heads.
            s.keys.pack(hd, n, |d, j| qkv[j * width + key + d]);
            s.values.pack(n, hd, |j, d| qkv[j * width + value + d]);
            for head in group * per_group..(group + 1) * per_group {
                let offset = head * hd;
                let q = Strided { data: &qkv[offset..], rows: n, stride: width };
                product(q, &s.keys, StridedMut { data: &mut s.scores, stride: n }, Epilogue::NONE, &mut s.kernel);
                for row in s.scores.chunks_exact_mut(n) {
                    softmax(row, scale);
                }
                let p = Strided { data: &s.scores, rows: n, stride: n };
                let context = StridedMut { data: &mut s.context[offset..], stride: qw };
                product(p, &s.values, context, Epilogue::NONE, &mut s.kernel);
            }
        }
        linear(&layer.attention_out, &s.context, n, &mut s.projected, &mut s.kernel, false);
        layer.post_attention_norm.apply(&mut s.projected, c.rms_norm_eps);
        add_in_place(x, &s.projected);
    }

    /// `x += norm(down(gelu_tanh(gate(norm(x))) · up(norm(x))))`.
    fn mlp_block(&self, layer: &Layer, x: &mut [f32], n: usize, s: &mut Scratch) {
        let (eps, inner) = (self.config.rms_norm_eps, self.config.intermediate_size);
        s.normed.clear();
        s.normed.extend_from_slice(x);
        layer.pre_mlp_norm.apply(&mut s.normed, eps);
        linear(&layer.gate_up, &s.normed, n, &mut s.gate_up, &mut s.kernel, false);
        s.hidden.resize(n * inner, 0.0);
        for (out, both) in s.hidden.chunks_exact_mut(inner).zip(s.gate_up.chunks_exact(2 * inner)) {
            let (gate, up) = both.split_at(inner);
            for j in 0..inner {
                out[j] = gelu_tanh(gate[j]) * up[j];
            }
        }
        linear(&layer.down, &s.hidden, n, &mut s.projected, &mut s.kernel, false);
        layer.post_mlp_norm.apply(&mut s.projected, eps);
        add_in_place(x, &s.projected);
    }
}

/// The dense layers, each `linear.weight` `[outputs, inputs]`, chained from `hidden` inputs.
fn dense_layers(files: &[Vec<u8>], hidden: usize) -> Result<Vec<Arc<Linear>>, EmbedError> {
    let mut inputs = hidden;
    files
        .iter()
        .zip(DENSE_FILES)
        .map(|(bytes, name)| {
            let file = Tensors::parse(bytes).map_err(|e| in_file(name, e))?;
            let shape = file.shape("linear.weight").map_err(|e| in_file(name, e))?;
            let invalid = |why: String| EmbedError::ModelInvalid(format!("{name}: linear.weight {why}"));
            let [outputs, from] = shape[..] else { return Err(invalid(format!("has shape {shape:?}"))) };
            if from != inputs {
                return Err(invalid(format!("takes {from} inputs, the layer before gives {inputs}")));
            }
            let weight = file.get("linear.weight", &[outputs, from]).map_err(|e| in_file(name, e))?;
            inputs = outputs;
            // f32 as stored: these products run once per text, on one row.
            Ok(Arc::new(Linear::unbiased(&weight, from, outputs, false)))
        })
        .collect()
}

/// An error about `model.safetensors` said of the dense layer's file instead.
fn in_file(name: &str, error: EmbedError) -> EmbedError {
    match error {
        EmbedError::ModelInvalid(why) => EmbedError::ModelInvalid(why.replacen("model.safetensors", name, 1)),
        other => other,
    }
}

/// GELU's tanh form, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, with tanh made of
/// [`exp_nonpositive`] (vectorisable, unlike libm's `tanhf`): `tanh(u) = sign(u)·(1 − e)/(1 + e)`,
/// `e = exp(−2|u|)`.
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    let e = exp_nonpositive(-2.0 * u.abs());
    let tanh = ((1.0 - e) / (1.0 + e)).copysign(u);
    0.5 * x * (1.0 + tanh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_tanh_matches_its_definition() {
        for i in -400..=400 {
            let x = i as f32 / 40.0;
            let expected = 0.5
                * f64::from(x)
                * (1.0 + (0.797_884_560_802_865_4 * (f64::from(x) + 0.044_715 * f64::from(x).powi(3))).tanh());
            assert!((f64::from(gelu_tanh(x)) - expected).abs() < 2e-6 * (1.0 + expected.abs()), "{x}");
        }
        assert_eq!(gelu_tanh(1e30), 1e30);
        assert_eq!(gelu_tanh(-1e30), 0.0);
    }

    #[test]
    fn rms_norm_scales_by_one_plus_the_weight() {
        let norm = RmsNorm::new(vec![0.0, 1.0]);
        let mut x = vec![3.0, 4.0];
        norm.apply(&mut x, 0.0);
        let rms = (12.5f32).sqrt();
        assert!((x[0] - 3.0 / rms).abs() < 1e-6 && (x[1] - 2.0 * 4.0 / rms).abs() < 1e-6, "{x:?}");
    }

    fn config(edit: impl FnOnce(&mut serde_json::Value)) -> Result<GemmaConfig, EmbedError> {
        let mut value = serde_json::json!({
            "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 4, "intermediate_size": 12, "vocab_size": 10, "max_position_embeddings": 64,
            "rms_norm_eps": 1e-6, "rope_theta": 1e6, "rope_local_base_freq": 1e4, "sliding_window": 16,
            "query_pre_attn_scalar": 4, "hidden_activation": "gelu_pytorch_tanh",
            "layer_types": ["sliding_attention", "full_attention"], "use_bidirectional_attention": true,
            "model_type": "gemma3_text"
        });
        edit(&mut value);
        GemmaConfig::from_json(&serde_json::to_vec(&value).unwrap())
    }

    #[test]
    fn a_config_the_encoder_cannot_run_is_refused_with_the_reason() {
        assert_eq!(config(|_| {}).unwrap().max_tokens(), 16, "cut at the sliding window");
        let why = |edit: fn(&mut serde_json::Value)| match config(edit) {
            Err(EmbedError::ModelInvalid(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(why(|v| v["use_bidirectional_attention"] = false.into()).contains("causal"));
        assert!(why(|v| v["hidden_activation"] = "relu".into()).contains("hidden_activation relu"));
        assert!(why(|v| v["layer_types"] = serde_json::json!(["full_attention"])).contains("1 layer_types for 2"));
        assert!(why(|v| v["layer_types"][0] = "chunked_attention".into()).contains("chunked_attention"));
        assert!(why(|v| v["num_key_value_heads"] = 3.into()).contains("2 query heads over 3"));
        assert!(why(|v| v["head_dim"] = 3.into()).contains("even head"));
        assert!(why(|v| v["rope_theta"] = "big".into()).contains("config.json"));
    }

    /// A tiny network with deterministic weights, in safetensors, and its dense layers.
    fn tiny_files(config: &GemmaConfig) -> (Vec<u8>, Vec<Vec<u8>>) {
        use safetensors::tensor::{Dtype, TensorView};
        let (h, inner, hd) = (config.hidden_size, config.intermediate_size, config.head_dim);
        let (qw, kw) = (config.queries_width(), config.keys_width());
        let mut shapes: Vec<(String, Vec<usize>)> =
            vec![("embed_tokens.weight".into(), vec![config.vocab_size, h]), ("norm.weight".into(), vec![h])];
        for l in 0..config.num_hidden_layers {
            let p = format!("layers.{l}");
            for (name, shape) in [
                ("input_layernorm", vec![h]),
                ("post_attention_layernorm", vec![h]),
                ("pre_feedforward_layernorm", vec![h]),
                ("post_feedforward_layernorm", vec![h]),
                ("self_attn.q_norm", vec![hd]),
                ("self_attn.k_norm", vec![hd]),
                ("self_attn.q_proj", vec![qw, h]),
                ("self_attn.k_proj", vec![kw, h]),
                ("self_attn.v_proj", vec![kw, h]),
                ("self_attn.o_proj", vec![h, qw]),
                ("mlp.gate_proj", vec![inner, h]),
                ("mlp.up_proj", vec![inner, h]),
                ("mlp.down_proj", vec![h, inner]),
            ] {
                shapes.push((format!("{p}.{name}.weight"), shape));
            }
        }
        let bytes = |len: usize, seed: usize| -> Vec<u8> {
            (0..len)
                .flat_map(|i| ((((i * 7919 + seed * 104_729) % 2001) as f32 / 4000.0) - 0.25).to_le_bytes())
                .collect()
        };
        let data: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
            .into_iter()
            .enumerate()
            .map(|(seed, (name, shape))| {
                let len = shape.iter().product();
                (name, shape, bytes(len, seed))
            })
            .collect();
        let serialise = |tensors: &[(String, Vec<usize>, Vec<u8>)]| {
            let views: Vec<(String, TensorView)> = tensors
                .iter()
                .map(|(n, s, d)| (n.clone(), TensorView::new(Dtype::F32, s.clone(), d).unwrap()))
                .collect();
            safetensors::serialize(views, None).unwrap()
        };
        let dense = [(2 * h, h), (h, 2 * h)]
            .iter()
            .enumerate()
            .map(|(i, &(o, inp))| serialise(&[("linear.weight".into(), vec![o, inp], bytes(o * inp, 90 + i))]))
            .collect();
        (serialise(&data), dense)
    }

    #[test]
    fn a_tiny_network_gives_a_unit_vector_that_depends_on_order_and_the_same_with_a_second_thread() {
        let config = config(|_| {}).unwrap();
        let (model, dense) = tiny_files(&config);
        let gemma = Gemma::load(config, &Tensors::parse(&model).unwrap(), &dense).unwrap();
        assert_eq!(gemma.dims(), 8);
        let v = gemma.embed(&[2, 5, 7, 1], None);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        // Rotary positions make the order count, though attention has no mask.
        assert_ne!(v, gemma.embed(&[2, 7, 5, 1], None));
        assert_eq!(gemma.embed(&[], None), vec![0.0; 8]);
        assert_eq!(gemma.embed(&[2, 5, 10, 7, 1], None), v, "an id past the table is dropped");
        // A query's products shared with the second thread: the same bits.
        if let Some(claim) = crate::second::claim() {
            assert_eq!(gemma.embed(&[2, 5, 7, 1], Some(claim)), v);
        }
        // Past the limit the text is cut: the same vector as its first 16 tokens.
        let long: Vec<u32> = (0..40).map(|i| i % 10).collect();
        assert_eq!(gemma.embed(&long, None), gemma.embed(&long[..16], None));
    }

    #[test]
    fn dense_layers_that_do_not_chain_or_do_not_parse_are_refused_naming_the_file() {
        let config = config(|_| {}).unwrap();
        let (model, mut dense) = tiny_files(&config);
        dense.swap(0, 1);
        match Gemma::load(config.clone(), &Tensors::parse(&model).unwrap(), &dense) {
            Err(EmbedError::ModelInvalid(why)) => {
                assert!(why.contains("2_Dense/model.safetensors") && why.contains("takes 16 inputs"), "{why}");
            }
            Ok(_) => panic!("loaded"),
            Err(other) => panic!("{other:?}"),
        }
        // A dense file that is not safetensors (a cut download) is named as such.
        dense.swap(0, 1);
        dense[1].truncate(40);
        match Gemma::load(config, &Tensors::parse(&model).unwrap(), &dense) {
            Err(EmbedError::ModelInvalid(why)) => assert!(why.starts_with("3_Dense/model.safetensors: "), "{why}"),
            Ok(_) => panic!("loaded"),
            Err(other) => panic!("{other:?}"),
        }
    }
}
