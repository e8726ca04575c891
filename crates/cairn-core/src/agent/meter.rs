//! The context meter's rules, shared by Claude Code's hook (a transcript's
//! last usage), op `context_usage` (the archive's last assistant message) and anything else that
//! reports how full a context window is: what counts as `used` in each host's usage record, the
//! window of a model, the status by the `[context_meter]` thresholds, and the number format.

use serde::{Deserialize, Serialize};

use crate::agent::protocol::Host;
pub use crate::context_window::{
    ContextUsage, MeterStatus, ONE_MILLION, thousands, trend_text, used_tokens, window_of,
};
use crate::error::{CairnError, Result};
use crate::settings::plugin::{CompactionSettings, ContextMeterSettings, PluginConfig};

/// The arguments of op `context_meter`: what a host knows of one answer's usage. The host
/// plugin asks instead of computing, so every host shows the same line and takes the same
/// compaction decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeterRequest {
    /// Tokens in the window after the last answer.
    pub used: u64,
    /// The model's window; absent or 0: the window of `model` (1M for a `[1m]` id), else
    /// `[context_meter] default_limit`.
    #[serde(default)]
    pub limit: Option<u64>,
    /// The model id as the host shows it (OpenCode: `provider/model`).
    #[serde(default)]
    pub model: Option<String>,
    /// Whose advice the line carries (`/compact` for Claude Code, `memory_compact` for OpenCode).
    #[serde(default)]
    pub host: Host,
}

impl MeterRequest {
    /// The usage it describes, with the window resolved.
    pub fn usage(&self, default_limit: u64) -> ContextUsage {
        let model = self.model.clone().unwrap_or_default();
        let limit = match self.limit {
            Some(limit) if limit > 0 => limit,
            _ => window_of(&model, default_limit),
        };
        ContextUsage { used: self.used, limit, model }
    }
}

/// The context meter, decided once for every host (the answer to `context_meter`, and the
/// `meter` of `user_prompt` and `session_start`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MeterReading {
    pub used: u64,
    pub limit: u64,
    /// Whole percent used, rounded down: a threshold shows only once it is reached.
    pub percent: u64,
    pub status: MeterStatus,
    /// The line to show the agent; none while green (or with the meter off): a line in every
    /// request that says "all is well" is noise the agent pays for.
    pub line: Option<String>,
    /// Whether a host that compacts by itself should compact now (`[compaction] auto_at`).
    pub auto_compact: bool,
    /// Whether an agent's own compaction request is worth it (`[compaction] min_percent`).
    pub compact_allowed: bool,
}

/// Read `usage` against the settings: the status, the line the agent sees and the compaction
/// decisions.
pub fn reading(
    usage: &ContextUsage,
    host: Host,
    meter: &ContextMeterSettings,
    compaction: &CompactionSettings,
) -> MeterReading {
    let percent = usage.percent();
    let status = MeterStatus::of(percent, meter);
    let line = (meter.enabled && status != MeterStatus::Green).then(|| meter_line(usage, percent, status, host));
    let auto_compact = compaction.auto_at.is_some_and(|at| {
        at > 0.0 && usage.used > 0 && percent as f64 >= at * 100.0 && percent >= u64::from(compaction.min_percent)
    });
    MeterReading {
        used: usage.used,
        limit: usage.limit,
        percent,
        status,
        line,
        auto_compact,
        compact_allowed: percent >= u64::from(compaction.min_percent),
    }
}

fn meter_line(usage: &ContextUsage, percent: u64, status: MeterStatus, host: Host) -> String {
    let model = if usage.model.is_empty() { String::new() } else { format!(", {}", usage.model) };
    let advice = match host {
        Host::Opencode => {
            "At the next natural break, call memory_compact to compact this session; cairn keeps the summary."
        }
        _ => "At the next natural break, suggest the user run /compact; cairn keeps the summary.",
    };
    format!(
        "{} Context: {percent}% used ({} / {} tokens{model}). {advice}",
        status.icon(),
        thousands(usage.used),
        thousands(usage.limit),
    )
}

/// Op `context_meter`: the reading of a host's numbers under these settings.
pub fn context_meter(req: &MeterRequest, config: &crate::settings::PluginConfig) -> Result<MeterReading> {
    if req.used == 0 {
        return Err(CairnError::invalid("used must be a positive number of tokens")
            .with_hint("send the tokens in the window after the last answer"));
    }
    Ok(reading(&req.usage(config.context_meter.default_limit), req.host, &config.context_meter, &config.compaction))
}

/// The meter of a host's usage under `config`.
pub fn meter_of(usage: &MeterRequest, host: Host, config: &PluginConfig) -> MeterReading {
    reading(&usage.usage(config.context_meter.default_limit), host, &config.context_meter, &config.compaction)
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

    fn read(used: u64, host: Host) -> MeterReading {
        let config = PluginConfig::default();
        let usage = ContextUsage { used, limit: 200_000, model: "claude-x".into() };
        reading(&usage, host, &config.context_meter, &config.compaction)
    }

    #[test]
    fn one_meter_rule_for_every_host() {
        // (tokens of 200,000, percent, status, icon or none): rounded down, so a threshold
        // shows only once reached; green has no line.
        let table: [(u64, u64, MeterStatus, Option<&str>); 9] = [
            (1, 0, MeterStatus::Green, None),
            (100_000, 50, MeterStatus::Green, None),
            (139_999, 69, MeterStatus::Green, None),
            (140_000, 70, MeterStatus::Yellow, Some("🟡")),
            (169_999, 84, MeterStatus::Yellow, Some("🟡")),
            (170_000, 85, MeterStatus::Red, Some("🟠")),
            (183_999, 91, MeterStatus::Red, Some("🟠")),
            (184_000, 92, MeterStatus::Critical, Some("🔴")),
            (250_000, 125, MeterStatus::Critical, Some("🔴")),
        ];
        for (used, percent, status, icon) in table {
            for host in [Host::ClaudeCode, Host::Opencode] {
                let r = read(used, host);
                assert_eq!((r.percent, r.status), (percent, status), "{used} tokens on {host:?}");
                assert_eq!(r.line.as_deref().map(|l| l.split(' ').next().unwrap()), icon, "{used} on {host:?}");
            }
        }
        let claude = read(150_000, Host::ClaudeCode).line.unwrap();
        assert_eq!(
            claude,
            "🟡 Context: 75% used (150,000 / 200,000 tokens, claude-x). At the next natural break, suggest \
             the user run /compact; cairn keeps the summary."
        );
        let opencode = read(150_000, Host::Opencode).line.unwrap();
        assert!(opencode.ends_with("call memory_compact to compact this session; cairn keeps the summary."));
        let mut off = PluginConfig::default();
        off.context_meter.enabled = false;
        let usage = ContextUsage { used: 199_000, limit: 200_000, model: String::new() };
        let r = reading(&usage, Host::ClaudeCode, &off.context_meter, &off.compaction);
        assert_eq!((r.line, r.status), (None, MeterStatus::Critical), "off: no line, the status still told");
    }

    #[test]
    fn the_compaction_decisions() {
        let mut config = PluginConfig::default();
        let at = |config: &PluginConfig, used: u64| {
            let usage = ContextUsage { used, limit: 1_000, model: String::new() };
            let r = reading(&usage, Host::Opencode, &config.context_meter, &config.compaction);
            (r.auto_compact, r.compact_allowed)
        };
        assert_eq!(config.compaction.min_percent, 50);
        assert_eq!(
            [at(&config, 499), at(&config, 500), at(&config, 999)],
            [(false, false), (false, true), (false, true)]
        );
        config.compaction.auto_at = Some(0.8);
        assert_eq!([at(&config, 799), at(&config, 800)], [(false, true), (true, true)]);
        config.compaction.auto_at = Some(0.3);
        assert_eq!(at(&config, 400), (false, false), "never below min_percent");
        assert_eq!(at(&config, 500), (true, true));
        let req = MeterRequest { used: 10, limit: None, model: Some("opus[1m]".into()), host: Host::Opencode };
        assert_eq!(req.usage(200_000).limit, ONE_MILLION);
        let req = MeterRequest { limit: Some(0), model: None, ..req };
        assert_eq!(req.usage(200_000).limit, 200_000, "0 is not a window");
        let defaults = crate::settings::PluginConfig::default();
        assert_eq!(
            context_meter(&MeterRequest::default(), &defaults).unwrap_err().code,
            crate::ErrorCode::InvalidArgument
        );
    }
}
