//! `LocalProvider`: the model loaded once, every chat a fresh sequence through it.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokenizers::Tokenizer;

use super::catalogue::LocalModelSpec;
use super::json::{JsonPrefix, ValueStrings};
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

/// A reused prompt prefix is a whole number of these tokens (see `Sequence::reusable`).
const REUSE_STEP: usize = 64;

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
    /// The prompt's first tokens whose keys and values the last call left in the cache: not
    /// computed again (the system prompt, when the calls share one).
    pub reused_tokens: usize,
    pub prompt: Duration,
    pub output_tokens: usize,
    pub generation: Duration,
    /// CPU time the process spent in each phase (all its threads; Linux only): what the work
    /// cost, where wall time also counts the time other processes held the cores.
    pub prompt_cpu: Option<Duration>,
    pub generation_cpu: Option<Duration>,
}

/// A GGUF model in memory. `chat` takes `&self`: calls run one at a time (the KV cache is the
/// model's). Each call answers as a fresh sequence would; the keys and values of the prompt
/// part it shares with the last call are reused, not computed again.
pub struct LocalProvider {
    name: String,
    sequence: Mutex<Sequence>,
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
            sequence: Mutex::new(Sequence { weights: loaded.weights, cached: Vec::new() }),
            tokenizer: loaded.tokenizer,
            template: loaded.template,
            stop_tokens: loaded.stop_tokens,
            context: options.max_context.min(loaded.context_length),
            seed: options.seed,
        })
    }

    /// The model's vocabulary (for the tests that script a forward pass over it).
    #[doc(hidden)]
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
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
        let prompt = self.prompt_of(request)?;
        let prefill = request.prefill().unwrap_or_default();
        let max_tokens = (request.max_tokens as usize).min(self.context - prompt.len());
        let mut sequence = self.sequence.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let reused = sequence.reusable(&prompt);
        // Forgotten until the call succeeds: a call that failed halfway leaves a cache that the
        // next one does not trust (it starts at position 0).
        sequence.cached.clear();
        let (output, in_cache, timings) =
            guarded(|| self.generate(&mut sequence.weights, &prompt, reused, max_tokens, request))?;
        sequence.cached = prompt.iter().chain(&output).take(in_cache).copied().collect();
        let continued = self
            .tokenizer
            .decode(&output, true)
            .map_err(|e| LlmError::Malformed(format!("the answer's tokens do not decode: {e}")))?;
        let text = format!("{prefill}{continued}");
        let usage = Usage { input_tokens: prompt.len() as u64, output_tokens: output.len() as u64 };
        Ok((ChatReply { text, usage, model: self.name.clone() }, timings))
    }

    /// How likely the model finds each of `choices` as its answer's next token after the
    /// chat (its prefill included): natural-log probabilities over the whole vocabulary, in the
    /// order given. A choice is read as its text's first token (" yes" and "yes" differ: give
    /// the form the answer would take). Nothing is generated: one prefill, whose cache the next
    /// call reuses like a chat's, so many questions about the same long prefix cost little more
    /// than their own different tails.
    pub fn next_token_logprobs(&self, request: &ChatRequest, choices: &[&str]) -> Result<Vec<f32>, LlmError> {
        let prompt = self.prompt_of(request)?;
        let choice_ids = choices
            .iter()
            .map(|choice| {
                let ids = self.encode(&[Piece::Text((*choice).to_owned())])?;
                ids.first().copied().ok_or_else(|| LlmError::Malformed(format!("`{choice}` has no token")))
            })
            .collect::<Result<Vec<u32>, LlmError>>()?;
        let mut sequence = self.sequence.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let reused = sequence.reusable(&prompt);
        sequence.cached.clear();
        let logits = guarded(|| prefill(&mut sequence.weights, &prompt, reused))?;
        sequence.cached = prompt;
        let log_total = log_sum_exp(&logits);
        Ok(choice_ids.iter().map(|&id| logits.get(id as usize).map_or(f32::NEG_INFINITY, |l| l - log_total)).collect())
    }

    /// The chat rendered by the model's template, its prefill after it, as token ids; refused
    /// when it leaves no room in the context for an answer.
    fn prompt_of(&self, request: &ChatRequest) -> Result<Vec<u32>, LlmError> {
        let mut pieces = self.template.render(request.without_prefill());
        let prefill = request.prefill().unwrap_or_default();
        if !prefill.is_empty() {
            pieces.push(Piece::Text(prefill.to_owned()));
        }
        let prompt = self.encode(&pieces)?;
        if prompt.len() >= self.context {
            return Err(LlmError::ContextFull { tokens: prompt.len(), limit: self.context });
        }
        Ok(prompt)
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

    /// The answer's tokens after `prompt`, whose first `reused` tokens the cache already holds;
    /// also how many tokens of the prompt and answer the cache holds at the end.
    fn generate(
        &self,
        weights: &mut Weights,
        prompt: &[u32],
        reused: usize,
        max_tokens: usize,
        request: &ChatRequest,
    ) -> candle_core::Result<(Vec<u32>, usize, LocalTimings)> {
        let (started, cpu) = (Instant::now(), process_cpu());
        let mut logits = prefill(weights, prompt, reused)?;
        let mut in_cache = prompt.len();
        let mut timings = LocalTimings {
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            prompt: started.elapsed(),
            prompt_cpu: cpu.zip(process_cpu()).map(|(a, b)| b.saturating_sub(a)),
            ..LocalTimings::default()
        };
        let (started, cpu) = (Instant::now(), process_cpu());
        let mut sampler = (request.temperature > 0.0).then(|| Sampler::new(self.seed, f64::from(request.temperature)));
        let mut answer =
            if request.json { Some(JsonAnswer::after(request.prefill().unwrap_or_default())?) } else { None };
        let mut output = Vec::new();
        let mut repeats = RepeatGuard::default();
        while output.len() < max_tokens {
            let Some(token) = self.choose(&logits, sampler.as_mut(), answer.as_ref().map(|a| &a.json))? else { break };
            if self.stop_tokens.contains(&token) {
                break;
            }
            output.push(token);
            let text = self.token_text(token);
            let before = answer.as_ref().map(|a| a.json.clone());
            let closed = answer.as_mut().and_then(|a| a.feed(&text));
            let in_item_list = before.as_ref().is_some_and(JsonPrefix::in_item_list)
                || answer.as_ref().is_some_and(|a| a.json.in_item_list());
            if repeats.looping(token, in_item_list) {
                tracing::debug!(tokens = output.len(), "the answer repeats itself; it ends here");
                break;
            }
            if answer.as_ref().is_some_and(|a| a.json.is_complete()) || output.len() == max_tokens {
                break;
            }
            let position = prompt.len() + output.len() - 1;
            logits = weights.forward(&[token], position)?;
            in_cache = position + 1;
            let (Some(answer), Some(before), Some(closed)) = (answer.as_mut(), before, closed) else { continue };
            let repairable = before.in_value_string() && answer.repairs < MAX_QUOTE_REPAIRS;
            if repairable && weights.resumes_anywhere() && self.wants_more_text(&logits, answer) {
                // The quote opened a quotation inside the text: written again escaped, and the
                // model goes on from there.
                let escaped = answer.reopen(before, &text);
                let ids = self.encode(&[Piece::Text(escaped)]).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
                output.pop();
                output.extend(&ids);
                logits = weights.forward(&ids, position)?;
                in_cache = position + ids.len();
                continue;
            }
            if answer.copies.looping(&closed) {
                tracing::debug!(tokens = output.len(), "the answer says again what it said; it ends here");
                break;
            }
        }
        timings.output_tokens = output.len();
        timings.generation = started.elapsed();
        timings.generation_cpu = cpu.zip(process_cpu()).map(|(a, b)| b.saturating_sub(a));
        Ok((output, in_cache, timings))
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

    /// Whether the model, right after a string value closed, would rather go on writing text than
    /// JSON: its likeliest next token is neither valid JSON there nor the end of its turn. Then
    /// the closing quote was meant as a quotation's opening or closing one ("causing an
    /// "Incorrect use of ParentDataWidget" error"), which a small model often leaves unescaped;
    /// taken as the string's end, it cuts the fact at "causing an".
    fn wants_more_text(&self, logits: &[f32], answer: &JsonAnswer) -> bool {
        let likeliest = argmax(logits);
        !self.stop_tokens.contains(&likeliest) && !answer.json.accepts(&self.token_text(likeliest))
    }

    fn token_text(&self, token: u32) -> String {
        self.tokenizer.decode(&[token], false).unwrap_or_default()
    }
}

/// The model's weights and what its KV cache holds.
struct Sequence {
    weights: Weights,
    /// The tokens whose keys and values the cache holds (the last call's prompt and answer).
    cached: Vec<u32>,
}

impl Sequence {
    /// How many of `prompt`'s first tokens need not be computed again: the run it shares with
    /// the cached tokens, cut to a whole number of `REUSE_STEP` tokens, and never the whole
    /// prompt (the last token's logits are the answer's first).
    ///
    /// Cut to a step so that a prompt computes the same way whether or not a prefix is reused:
    /// the prefill goes in `PREFILL_CHUNK`-token chunks, and the chunks after a reused prefix
    /// start where a fresh run's chunks start too (a step divides a chunk).
    fn reusable(&self, prompt: &[u32]) -> usize {
        if !self.weights.resumes_anywhere() {
            return 0;
        }
        let shared = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        let shared = shared.min(prompt.len().saturating_sub(1));
        shared - shared % REUSE_STEP
    }
}

/// The prompt's positions after the first `reused` through the model, a chunk at a time: the
/// logits of its last token (the answer's first).
fn prefill(weights: &mut Weights, prompt: &[u32], reused: usize) -> candle_core::Result<Vec<f32>> {
    let mut logits = Vec::new();
    for chunk in prefill_chunks(reused, prompt.len()) {
        logits = weights.forward(&prompt[chunk.clone()], chunk.start)?;
    }
    Ok(logits)
}

/// A run of the model whose panic or error is the model's failure, never the caller's.
fn guarded<T>(run: impl FnOnce() -> candle_core::Result<T>) -> Result<T, LlmError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .map_err(|panic| LlmError::Unavailable(format!("the local model failed: {}", panic_text(&*panic))))?
        .map_err(|e| LlmError::Unavailable(format!("the local model failed: {e}")))
}

/// The prompt's positions from `reused` to `len` in chunks that end where a fresh run's
/// chunks end (at multiples of `PREFILL_CHUNK`), so that reusing a prefix changes nothing else.
fn prefill_chunks(reused: usize, len: usize) -> Vec<std::ops::Range<usize>> {
    let mut chunks = Vec::new();
    let mut start = reused;
    while start < len {
        let end = ((start / PREFILL_CHUNK + 1) * PREFILL_CHUNK).min(len);
        chunks.push(start..end);
        start = end;
    }
    chunks
}

/// How many quotes of one answer may be taken back as a quotation inside a string; past that the
/// model is not quoting but lost, and its quotes end strings as written.
const MAX_QUOTE_REPAIRS: usize = 8;

/// A JSON answer as it is written: the validator, the string values the last token closed, and
/// how often the answer said one of them again.
struct JsonAnswer {
    json: JsonPrefix,
    strings: ValueStrings,
    copies: CopyGuard,
    repairs: usize,
}

impl JsonAnswer {
    fn after(prefill: &str) -> candle_core::Result<Self> {
        Ok(Self {
            json: json_after(prefill)?,
            strings: ValueStrings::default(),
            copies: CopyGuard::default(),
            repairs: 0,
        })
    }

    /// Feed a token's text; the string value it closed, if it closed one.
    fn feed(&mut self, text: &str) -> Option<String> {
        self.strings.closed.clear();
        self.json.feed_collecting(text, &mut self.strings);
        self.strings.closed.first().cloned()
    }

    /// Take back the last token, `text`, which closed the string value that `before` was
    /// inside, and feed it again with that quote escaped (what followed the quote in the token
    /// dropped); the text to feed the model instead.
    fn reopen(&mut self, before: JsonPrefix, text: &str) -> String {
        let quote = closing_quote(&before, text);
        let reopened = self.strings.closed.first().cloned().unwrap_or_default();
        self.strings.closed.clear();
        let escaped = format!("{}\\\"", &text[..quote]);
        self.json = before;
        self.strings.reopen(&reopened[..reopened.len() - quote]);
        self.json.feed_collecting(&escaped, &mut self.strings);
        self.repairs += 1;
        escaped
    }
}

/// Where in `text` the string value that `json` is inside closes (the byte offset of its quote;
/// the text's length when it does not close in it).
fn closing_quote(json: &JsonPrefix, text: &str) -> usize {
    let mut probe = json.clone();
    for (at, c) in text.char_indices() {
        probe.feed(&text[at..at + c.len_utf8()]);
        if !probe.in_value_string() {
            return at;
        }
    }
    text.len()
}

/// How many string values of an answer that repeat an earlier one in other words make it a
/// loop. The first is let pass (the caller drops it as a variant); a second means the model is
/// filling one template again and again (seen: "uses Godot 4.4", "…4.5", … "…5.2", the same
/// inhibit rule with a new message id each time, each answer to its 1,200-token cap).
const LOOP_COPIES: usize = 2;

/// Values shorter than this (a type, a message id, a short title) repeat by design.
const COPY_MIN_WORDS: usize = 4;

/// Spots an answer that says again what it already said, in other words.
#[derive(Debug, Default)]
struct CopyGuard {
    /// The distinct long string values so far.
    said: Vec<String>,
    copies: usize,
}

impl CopyGuard {
    /// Whether `value`, just closed, makes the answer a loop.
    fn looping(&mut self, value: &str) -> bool {
        if value.split_whitespace().count() < COPY_MIN_WORDS {
            return false;
        }
        if self.said.iter().any(|earlier| crate::extract::is_variant_of(value, earlier)) {
            self.copies += 1;
            return self.copies >= LOOP_COPIES;
        }
        self.said.push(value.to_owned());
        false
    }
}

/// The JSON validator with the prefill already fed: the answer continues it.
fn json_after(prefill: &str) -> candle_core::Result<JsonPrefix> {
    let mut json = JsonPrefix::default();
    if json.feed(prefill) {
        Ok(json)
    } else {
        candle_core::bail!("the request's prefill {prefill:?} is not the start of a JSON value")
    }
}

/// How many tokens in a row, seen before in the same answer, make it a loop. A small model that
/// lost its way can repeat the same sentences until the length cap (seen: the same three
/// sentences for 1,000 tokens), and greedy decoding never leaves such a loop. A fact's JSON
/// frame (`"}, {"type": "config", "title": "`) is ~15 tokens, so a run this long is text
/// written twice.
const LOOP_TOKENS: usize = 48;

/// Spots an answer that repeats itself: a run of `LOOP_TOKENS` tokens that already appeared in
/// it. The answer then ends where it stands; the caller keeps what closed before the loop
/// (a facts answer's finished facts), and nothing is spent on the rest of the cap.
///
/// A list inside an item (a fact's message ids) is read apart: two facts from the same
/// messages cite the same ids, and a dozen ids with the frame around them are a run that long.
/// Read with the rest, they ended about 34 of 545 facts answers on fifteen recorded splits
/// (eight ids or more in the answer's last 160 characters) in the middle of a fact, each losing
/// the facts still to come. A list that repeats itself is a loop all the same.
#[derive(Debug, Default)]
struct RepeatGuard {
    /// The answer's tokens outside item lists.
    answer: TokenRuns,
    /// The tokens of the item list being written.
    list: TokenRuns,
}

impl RepeatGuard {
    /// Whether `token`, the newest of the answer, makes it a loop; `in_item_list` when it was
    /// written in (or into, or out of) a list inside an item.
    fn looping(&mut self, token: u32, in_item_list: bool) -> bool {
        if in_item_list {
            return self.list.repeats_with(token);
        }
        self.list = TokenRuns::default();
        self.answer.repeats_with(token)
    }
}

/// A stream of tokens that tells when its newest `LOOP_TOKENS` appeared in it before.
#[derive(Debug, Default)]
struct TokenRuns {
    tokens: Vec<u32>,
    /// Where each run seen so far starts, by its hash.
    seen: std::collections::HashMap<u64, Vec<usize>>,
}

impl TokenRuns {
    fn repeats_with(&mut self, token: u32) -> bool {
        self.tokens.push(token);
        let Some(start) = self.tokens.len().checked_sub(LOOP_TOKENS) else { return false };
        let run = &self.tokens[start..];
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::hash::DefaultHasher::new();
            run.hash(&mut hasher);
            hasher.finish()
        };
        let starts = self.seen.entry(hash).or_default();
        let seen_before = starts.iter().any(|&s| self.tokens.get(s..s + LOOP_TOKENS) == Some(run));
        starts.push(start);
        seen_before
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

/// `ln Σ exp(l)`, computed from the largest logit so that no term overflows.
fn log_sum_exp(logits: &[f32]) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return max;
    }
    max + logits.iter().map(|l| (l - max).exp()).sum::<f32>().ln()
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
    fn an_answer_that_repeats_a_long_run_is_a_loop() {
        let mut guard = RepeatGuard::default();
        let sentence: Vec<u32> = (100..130).collect();
        let mut written = 0;
        let mut looped_at = None;
        for token in (0..20).chain((0..4).flat_map(|_| sentence.clone())) {
            written += 1;
            if looped_at.is_none() && guard.looping(token, false) {
                looped_at = Some(written);
            }
        }
        // 20 + 30 tokens, then the sentence again: the newest 48 tokens first repeat when the
        // second copy has 48 tokens after the first copy's start, i.e. at 20 + 30 + 48.
        assert_eq!(looped_at, Some(98), "the second repeat of a 30-token sentence is found");

        let mut guard = RepeatGuard::default();
        assert!(!(0..500).any(|token| guard.looping(token, false)), "an answer with no repeated run is never cut");
    }

    #[test]
    fn ids_cited_again_are_no_loop_but_a_list_that_repeats_itself_is() {
        // Three facts, each its own text, each citing the same 60-token list of ids.
        let ids: Vec<u32> = (900..960).collect();
        let mut guard = RepeatGuard::default();
        let looped = (0..3).any(|fact| {
            let text = (fact * 100..fact * 100 + 30).any(|token| guard.looping(token, false));
            text || ids.iter().any(|&id| guard.looping(id, true))
        });
        assert!(!looped, "the same ids under three facts");

        let mut guard = RepeatGuard::default();
        let runaway = (0..5).flat_map(|_| ids.clone()).any(|id| guard.looping(id, true));
        assert!(runaway, "one list that repeats its ids again and again");
    }

    #[test]
    fn a_value_said_again_in_other_words_twice_is_a_loop() {
        let mut guard = CopyGuard::default();
        assert!(!guard.looping("The game uses the Godot engine version 4.3"));
        assert!(!guard.looping("config"));
        assert!(!guard.looping("config"), "a type or an id repeats by design");
        assert!(!guard.looping("Staging listens on port 5433 in deploy/staging.env"), "another fact");
        assert!(!guard.looping("The game uses the Godot engine version 4.4"), "the first copy passes");
        assert!(guard.looping("The game uses the Godot engine version 4.5"), "the second ends the answer");

        let mut guard = CopyGuard::default();
        let distinct = [
            "The banner was wrapped in Expanded inside a Stack",
            "Crashlytics gets Flutter framework errors from now on",
            "minSdk is 26 because health_connect needs it",
            "Release builds are obfuscated with split debug info",
        ];
        assert!(distinct.iter().all(|fact| !guard.looping(fact)), "distinct facts never end an answer");
    }

    #[test]
    fn a_reused_prefix_leaves_the_fresh_runs_chunk_ends() {
        assert_eq!(prefill_chunks(0, 1100), [0..512, 512..1024, 1024..1100]);
        assert_eq!(prefill_chunks(448, 1100), [448..512, 512..1024, 1024..1100]);
        assert_eq!(prefill_chunks(512, 600), vec![512..600]);
        assert!(prefill_chunks(64, 64).is_empty());
    }

    #[test]
    fn a_prefill_is_fed_to_the_json_validator() {
        let json = json_after(r#"{"facts": ["#).unwrap();
        assert!(json.accepts(r#"{"type": "config"}]}"#));
        assert!(!json.accepts("}"), "the list is open: the object cannot close before it");
        assert!(json_after("Here are the facts").is_err());
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
