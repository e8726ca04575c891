//! `LocalProvider`: the model loaded once, every chat a fresh sequence through it.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokenizers::Tokenizer;

use super::catalogue::LocalModelSpec;
use super::json::JsonPrefix;
use super::model::{self, Forward, Weights};
use super::sampler::Sampler;
use super::template::{ChatTemplate, Piece};
use crate::{ChatReply, ChatRequest, LlmError, LlmProvider, Usage};

/// The environment variable that sets how many threads the model computes on (read once per
/// process, at the first call; default: the cores the process may use). The daemon sets it
/// when it starts a worker that runs the model; everything else leaves it alone.
pub const THREADS_ENV: &str = "CANDLE_NUM_THREADS";

/// The prompt goes through the model this many tokens at a time: attention over a whole
/// 4k-token session at once would hold a 4k × 4k score matrix per head.
const PREFILL_CHUNK: usize = 512;

/// With a JSON request, how many of the likeliest tokens are tried first for one that keeps the
/// answer valid (the rest of the vocabulary is tried only when none of them does).
const JSON_CANDIDATES: usize = 64;

/// How a local model is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOptions {
    /// The longest sequence (prompt and answer) a call may use, at most the model's own
    /// context. The KV cache grows with it: ~28 KB per token for Qwen2.5-1.5B.
    pub max_context: usize,
    /// The seed of sampling at a temperature above 0 (0 is greedy and needs none).
    pub seed: u64,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self { max_context: 8192, seed: 299_792_458 }
    }
}

/// Where the time of one call went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LocalTimings {
    pub prompt_tokens: usize,
    pub prompt: Duration,
    pub output_tokens: usize,
    pub generation: Duration,
    /// CPU time the process spent in each phase (all its threads; Linux only): what the work
    /// cost, where wall time also counts the time other processes held the cores.
    pub prompt_cpu: Option<Duration>,
    pub generation_cpu: Option<Duration>,
}

/// A GGUF model in memory. `chat` takes `&self`: calls run one at a time (the KV cache is the
/// model's), each a fresh sequence.
pub struct LocalProvider {
    name: String,
    weights: Mutex<Weights>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    stop_tokens: Vec<u32>,
    context: usize,
    seed: u64,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("name", &self.name)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl LocalProvider {
    /// Load the model at `path` (an installed copy of `spec`) with the default options.
    pub fn open(path: &Path, spec: &LocalModelSpec) -> Result<Self, LlmError> {
        Self::open_with(path, spec, &LocalOptions::default())
    }

    /// Load the model at `path`. The file's size is checked against `spec` (the sha256 was
    /// checked when it was installed; hashing a gigabyte at every start would cost seconds);
    /// a file that is no model, truncated or of an architecture cairn does not run is an
    /// `LlmError::ModelFile`, never a panic.
    pub fn open_with(path: &Path, spec: &LocalModelSpec, options: &LocalOptions) -> Result<Self, LlmError> {
        Self::open_on(path, spec, options, None)
    }

    /// Load the model at `path` on another forward pass of the same file (candle-transformers'
    /// models, for the benchmark and the tests that compare them with cairn's decoder).
    #[doc(hidden)]
    pub fn open_with_weights(
        path: &Path,
        spec: &LocalModelSpec,
        options: &LocalOptions,
        weights: Box<dyn Forward>,
    ) -> Result<Self, LlmError> {
        Self::open_on(path, spec, options, Some(weights))
    }

    fn open_on(
        path: &Path,
        spec: &LocalModelSpec,
        options: &LocalOptions,
        weights: Option<Weights>,
    ) -> Result<Self, LlmError> {
        let size = std::fs::metadata(path)
            .map_err(|e| {
                LlmError::ModelFile(format!(
                    "{}: {e}; install it: cairn llm use local --model {}",
                    path.display(),
                    spec.name
                ))
            })?
            .len();
        if size != spec.bytes {
            return Err(LlmError::ModelFile(format!(
                "{} is {size} bytes, {} is {}: it is another file or a partial copy; install it again: \
                 cairn llm use local --model {} [--from FILE]",
                path.display(),
                spec.name,
                spec.bytes,
                spec.name
            )));
        }
        let loaded =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model::load(path, options.max_context, weights)))
                .map_err(|panic| {
                    LlmError::ModelFile(format!("{} could not be loaded ({})", path.display(), panic_text(&*panic)))
                })??;
        Ok(Self {
            name: spec.name.to_owned(),
            weights: Mutex::new(loaded.weights),
            tokenizer: loaded.tokenizer,
            template: loaded.template,
            stop_tokens: loaded.stop_tokens,
            context: options.max_context.min(loaded.context_length),
            seed: options.seed,
        })
    }

    /// The threads the model computes on (see `THREADS_ENV`).
    pub fn threads() -> usize {
        [THREADS_ENV, "RAYON_NUM_THREADS"]
            .iter()
            .find_map(|var| std::env::var(var).ok()?.parse::<usize>().ok().filter(|n| *n > 0))
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
    }

    /// One chat, with where its time went (the benchmark's figures).
    pub fn chat_timed(&self, request: &ChatRequest) -> Result<(ChatReply, LocalTimings), LlmError> {
        let prompt = self.encode(&self.template.render(&request.messages))?;
        if prompt.len() >= self.context {
            return Err(LlmError::ContextFull { tokens: prompt.len(), limit: self.context });
        }
        let max_tokens = (request.max_tokens as usize).min(self.context - prompt.len());
        let mut weights = self.weights.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Every call starts at position 0, which resets the cache: a call that failed halfway
        // leaves nothing that the next one reads.
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.generate(&mut weights, &prompt, max_tokens, request)
        }));
        let (output, timings) = run
            .map_err(|panic| LlmError::Unavailable(format!("the local model failed: {}", panic_text(&*panic))))?
            .map_err(|e| LlmError::Unavailable(format!("the local model failed: {e}")))?;
        let text = self
            .tokenizer
            .decode(&output, true)
            .map_err(|e| LlmError::Malformed(format!("the answer's tokens do not decode: {e}")))?;
        let usage = Usage { input_tokens: prompt.len() as u64, output_tokens: output.len() as u64 };
        Ok((ChatReply { text, usage, model: self.name.clone() }, timings))
    }

    /// The rendered chat as token ids: markers looked up, text tokenized as text.
    fn encode(&self, pieces: &[Piece]) -> Result<Vec<u32>, LlmError> {
        let mut ids = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Special(marker) => ids.push(self.tokenizer.token_to_id(marker).ok_or_else(|| {
                    LlmError::ModelFile(format!(
                        "the model's vocabulary has no `{marker}`, which its chat template needs"
                    ))
                })?),
                Piece::Text(text) => ids.extend(
                    self.tokenizer
                        .encode(text.as_str(), false)
                        .map_err(|e| LlmError::Malformed(format!("the prompt does not tokenize: {e}")))?
                        .get_ids(),
                ),
            }
        }
        Ok(ids)
    }

    fn generate(
        &self,
        weights: &mut Weights,
        prompt: &[u32],
        max_tokens: usize,
        request: &ChatRequest,
    ) -> candle_core::Result<(Vec<u32>, LocalTimings)> {
        let (started, cpu) = (Instant::now(), process_cpu());
        let mut logits = Vec::new();
        for (i, chunk) in prompt.chunks(PREFILL_CHUNK).enumerate() {
            logits = weights.forward(chunk, i * PREFILL_CHUNK)?;
        }
        let mut timings = LocalTimings {
            prompt_tokens: prompt.len(),
            prompt: started.elapsed(),
            prompt_cpu: cpu.zip(process_cpu()).map(|(a, b)| b.saturating_sub(a)),
            ..LocalTimings::default()
        };
        let (started, cpu) = (Instant::now(), process_cpu());
        let mut sampler = (request.temperature > 0.0).then(|| Sampler::new(self.seed, f64::from(request.temperature)));
        let mut json = request.json.then(JsonPrefix::default);
        let mut output = Vec::new();
        while output.len() < max_tokens {
            let Some(token) = self.choose(&logits, sampler.as_mut(), json.as_ref())? else { break };
            if self.stop_tokens.contains(&token) {
                break;
            }
            output.push(token);
            if let Some(json) = json.as_mut() {
                json.feed(&self.token_text(token));
                if json.is_complete() {
                    break;
                }
            }
            if output.len() < max_tokens {
                logits = weights.forward(&[token], prompt.len() + output.len() - 1)?;
            }
        }
        timings.output_tokens = output.len();
        timings.generation = started.elapsed();
        timings.generation_cpu = cpu.zip(process_cpu()).map(|(a, b)| b.saturating_sub(a));
        Ok((output, timings))
    }

    /// The next token: the likeliest (or a sampled one), and with a JSON request the likeliest
    /// that keeps the answer valid JSON (end of turn is not valid before the value closes).
    /// `None` when no candidate keeps it valid: the answer ends as it stands.
    fn choose(
        &self,
        logits: &[f32],
        sampler: Option<&mut Sampler>,
        json: Option<&JsonPrefix>,
    ) -> candle_core::Result<Option<u32>> {
        let valid = |token: u32| {
            json.is_none_or(|json| {
                let text = self.token_text(token);
                !self.stop_tokens.contains(&token) && !text.is_empty() && json.accepts(&text)
            })
        };
        if let Some(sampler) = sampler {
            let token = sampler.sample(logits)?;
            if valid(token) {
                return Ok(Some(token));
            }
        }
        if json.is_none() {
            return Ok(Some(argmax(logits)));
        }
        Ok(likeliest_valid(logits, valid))
    }

    fn token_text(&self, token: u32) -> String {
        self.tokenizer.decode(&[token], false).unwrap_or_default()
    }
}

/// The CPU time of this process so far (user and system, every thread), from `/proc/self/stat`
/// (in USER_HZ ticks of 10 ms); `None` where there is no such file.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces: count from after its closing paren.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

#[cfg(test)]
pub(super) fn argmax_of(logits: &[f32]) -> u32 {
    argmax(logits)
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in logits.iter().enumerate() {
        if *v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The likeliest token `valid` accepts: among the [`JSON_CANDIDATES`] likeliest first.
///
/// Rarely none of those keeps the answer valid. Seen: a fused token (`` `"``) closed a string
/// where the model meant a quote inside it, and every likely next token was the quoted word.
/// Then the whole vocabulary, likeliest first, is tried before the answer is given up as it
/// stands: the string ends there, and the facts after it still come.
fn likeliest_valid(logits: &[f32], valid: impl Fn(u32) -> bool) -> Option<u32> {
    likeliest(logits, JSON_CANDIDATES)
        .into_iter()
        .find(|t| valid(*t))
        .or_else(|| likeliest(logits, logits.len()).into_iter().skip(JSON_CANDIDATES).find(|t| valid(*t)))
}

/// The `n` likeliest tokens, likeliest first.
fn likeliest(logits: &[f32], n: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let n = n.min(ids.len());
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
    if n < ids.len() {
        ids.select_nth_unstable_by(n, by_logit);
        ids.truncate(n);
    }
    ids.sort_unstable_by(by_logit);
    ids
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

impl LlmProvider for LocalProvider {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn model(&self) -> &str {
        &self.name
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        self.chat_timed(request).map(|(reply, _)| reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn likeliest_orders_by_logit_and_ties_do_not_matter() {
        let logits = [0.1, 3.0, -1.0, 2.0, 2.5];
        assert_eq!(likeliest(&logits, 3), vec![1, 4, 3]);
        assert_eq!(likeliest(&logits, 10).len(), 5);
        assert_eq!(argmax(&logits), 1);
    }

    #[test]
    fn a_valid_token_is_found_beyond_the_likeliest_candidates() {
        // 1,000 tokens, likelier the lower the id; only the 200th likeliest and later are valid.
        let logits: Vec<f32> = (0..1000).map(|i| -(i as f32)).collect();
        assert_eq!(likeliest_valid(&logits, |t| t >= 199), Some(199));
        assert_eq!(likeliest_valid(&logits, |t| t == 3 || t >= 199), Some(3), "the likeliest valid one first");
        assert_eq!(likeliest_valid(&logits, |_| false), None, "none valid: the answer ends");
    }
}
