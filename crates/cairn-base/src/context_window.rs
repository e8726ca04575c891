//! How full a context window is, read from a host's usage record: the tokens in the window,
//! the window of a model, the status against the `[context_meter]` thresholds, and the number
//! format. The context meter (`agent::meter`) and the archive's `context_usage` share it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::settings::plugin::ContextMeterSettings;

/// Context window of a model id carrying `[1m]` (Claude Code's 1M-context variants).
pub const ONE_MILLION: u64 = 1_000_000;

/// How full the context window is, from one assistant answer's usage.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextUsage {
    pub used: u64,
    pub limit: u64,
    pub model: String,
}

impl ContextUsage {
    /// Whole percent used, rounded down (0 for a zero window).
    pub fn percent(&self) -> u64 {
        (self.used.saturating_mul(100)).checked_div(self.limit).unwrap_or(0)
    }
}

/// The window of `model`: 1M for a `[1m]` id, else `default_limit` (`[context_meter]
/// default_limit`, 200k unless configured; at least 1).
pub fn window_of(model: &str, default_limit: u64) -> u64 {
    if model.contains("[1m]") { ONE_MILLION } else { default_limit.max(1) }
}

/// The tokens one answer put in the window, from its host's usage record as stored:
/// - Claude Code (`message.usage`): `input_tokens + cache_creation_input_tokens +
///   cache_read_input_tokens` (what was sent; the output is not in the window yet);
/// - OpenCode (`tokens` of an assistant message): `total`, else `input + output + cache.read +
///   cache.write` (OpenCode's own overflow formula).
///
/// The shape tells the host apart (Claude Code's keys end in `_tokens`). 0 when the record says
/// nothing usable.
pub fn used_tokens(usage: &Value) -> u64 {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    if usage.get("input_tokens").is_some()
        || usage.get("cache_read_input_tokens").is_some()
        || usage.get("cache_creation_input_tokens").is_some()
    {
        return n(usage.get("input_tokens"))
            + n(usage.get("cache_creation_input_tokens"))
            + n(usage.get("cache_read_input_tokens"));
    }
    let total = n(usage.get("total"));
    if total > 0 {
        return total;
    }
    n(usage.get("input")) + n(usage.get("output")) + n(usage.pointer("/cache/read")) + n(usage.pointer("/cache/write"))
}

/// Where usage stands against the `[context_meter]` thresholds: green below `yellow`, yellow
/// from `yellow`, red from `red`, critical from `critical` (percentages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum MeterStatus {
    Green,
    Yellow,
    Red,
    Critical,
}

impl MeterStatus {
    pub fn of(percent: u64, settings: &ContextMeterSettings) -> MeterStatus {
        if percent >= u64::from(settings.critical) {
            MeterStatus::Critical
        } else if percent >= u64::from(settings.red) {
            MeterStatus::Red
        } else if percent >= u64::from(settings.yellow) {
            MeterStatus::Yellow
        } else {
            MeterStatus::Green
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MeterStatus::Green => "green",
            MeterStatus::Yellow => "yellow",
            MeterStatus::Red => "red",
            MeterStatus::Critical => "critical",
        }
    }
}

impl MeterStatus {
    /// The one icon set every host shows: 🟢 green, 🟡 yellow, 🟠 red, 🔴 critical.
    pub fn icon(self) -> &'static str {
        match self {
            MeterStatus::Green => "🟢",
            MeterStatus::Yellow => "🟡",
            MeterStatus::Red => "🟠",
            MeterStatus::Critical => "🔴",
        }
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The change from the previous answer, as people read it: `+3,200 tokens since the last
/// answer`, `-41,000 tokens since the last answer (a compaction?)`, `no change since the last
/// answer`.
pub fn trend_text(delta: i64) -> String {
    match delta {
        0 => "no change since the last answer".to_owned(),
        d if d > 0 => format!("+{} tokens since the last answer", thousands(d.unsigned_abs())),
        d => format!("-{} tokens since the last answer", thousands(d.unsigned_abs())),
    }
}
