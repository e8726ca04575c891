//! The context meter's rules (host-integration O4), shared by Claude Code's hook (a transcript's
//! last usage), op `context_usage` (the archive's last assistant message) and anything else that
//! reports how full a context window is: what counts as `used` in each host's usage record, the
//! window of a model, the status by the `[context_meter]` thresholds, and the number format.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::plugin::PluginConfig;
    use serde_json::json;

    #[test]
    fn each_host_counts_what_is_in_the_window() {
        let claude = json!({"input_tokens": 100, "cache_creation_input_tokens": 40, "cache_read_input_tokens": 10,
            "output_tokens": 999});
        assert_eq!(used_tokens(&claude), 150, "Claude Code: the output is not counted");
        let opencode = json!({"input": 100, "output": 50, "reasoning": 7, "cache": {"read": 20, "write": 5}});
        assert_eq!(used_tokens(&opencode), 175, "OpenCode without total: input+output+cache");
        assert_eq!(used_tokens(&json!({"total": 9000, "input": 1, "output": 1})), 9000, "OpenCode's total wins");
        assert_eq!(used_tokens(&json!({"total": 0, "input": 3, "output": 4})), 7);
        assert_eq!(used_tokens(&json!({})), 0);
        assert_eq!(used_tokens(&json!("junk")), 0);
    }

    #[test]
    fn windows_and_thresholds() {
        assert_eq!(window_of("claude-opus-4-6[1m]", 200_000), ONE_MILLION);
        assert_eq!(window_of("claude-sonnet-4-5", 200_000), 200_000);
        assert_eq!(window_of("m", 0), 1);
        let s = PluginConfig::default().context_meter;
        let status = |p| MeterStatus::of(p, &s);
        assert_eq!(
            [status(0), status(69), status(70), status(84)],
            [MeterStatus::Green, MeterStatus::Green, MeterStatus::Yellow, MeterStatus::Yellow]
        );
        assert_eq!(
            [status(85), status(91), status(92), status(100)],
            [MeterStatus::Red, MeterStatus::Red, MeterStatus::Critical, MeterStatus::Critical]
        );
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(trend_text(3_200), "+3,200 tokens since the last answer");
        assert_eq!(trend_text(-41_000), "-41,000 tokens since the last answer");
        assert_eq!(trend_text(0), "no change since the last answer");
    }
}
