//! The human-readable table.

use std::fmt::Write as _;

use crate::bench::{PhaseResult, Report, TargetReport};

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let c = &report.config;
    let _ = writeln!(
        out,
        "cairn-bench {} · seed {} · size {} · clients {}{} · wall {:.1} s",
        report.bench_version,
        c.seed,
        c.size,
        c.clients,
        c.mode.as_deref().map(|m| format!(" · mode {m}")).unwrap_or_default(),
        report.wall_secs
    );
    for t in &report.targets {
        out.push('\n');
        render_target(&mut out, t);
    }
    if !report.ratios.is_empty() {
        let _ = writeln!(out, "\nB/A ratios (p50, p99: below 1 = B faster; rate: above 1 = B more per second)");
        let _ = writeln!(out, "  {:<16} {:>7} {:>7} {:>7}", "phase", "p50", "p99", "rate");
        for r in &report.ratios {
            let f = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"));
            let _ = writeln!(out, "  {:<16} {:>7} {:>7} {:>7}", r.phase, f(r.p50), f(r.p99), f(r.rate));
        }
    }
    out
}

fn render_target(out: &mut String, t: &TargetReport) {
    let service = if t.service.is_empty() { String::new() } else { format!("  ({})", t.service) };
    let _ = writeln!(out, "{}  {}{service}", t.label, t.target.describe());
    let mut facts = Vec::new();
    if let Some(ms) = t.cold_start_ms {
        facts.push(format!("cold start {} ms (median)", ms_fmt(ms)));
    }
    if let Some(b) = t.peak_rss_bytes {
        facts.push(format!("peak RSS {}", bytes_fmt(b)));
    }
    if let Some(b) = t.disk_bytes {
        facts.push(format!("disk {}", bytes_fmt(b)));
    }
    if let Some(n) = t.final_observations {
        facts.push(format!("{n} observations at the end"));
    }
    if !facts.is_empty() {
        let _ = writeln!(out, "  {}", facts.join(" · "));
    }
    let _ = writeln!(
        out,
        "  {:<16} {:>7} {:>5} {:>15} {:>8} {:>8} {:>8} {:>8} {:>5} {:>6}",
        "phase", "ok", "err", "rate", "p50 ms", "p95 ms", "p99 ms", "max ms", "hits", "empty"
    );
    for p in &t.phases {
        render_phase(out, p);
    }
    for n in &t.notes {
        let _ = writeln!(out, "  note: {}", n.replace('\n', "\n    "));
    }
}

fn render_phase(out: &mut String, p: &PhaseResult) {
    if let Some(why) = &p.skipped {
        let _ = writeln!(out, "  {:<16} skipped: {why}", p.name);
        return;
    }
    let rate = format!("{} {}", rate_fmt(p.rate), p.unit);
    let hits = p.mean_hits.map_or_else(String::new, |h| format!("{h:.1}"));
    let empty = p.empty_share.map_or_else(String::new, |e| format!("{:.0}%", e * 100.0));
    let l = &p.latency;
    let _ = writeln!(
        out,
        "  {:<16} {:>7} {:>5} {:>15} {:>8} {:>8} {:>8} {:>8} {:>5} {:>6}",
        p.name,
        p.ok,
        p.errors,
        rate,
        ms_fmt(l.p50),
        ms_fmt(l.p95),
        ms_fmt(l.p99),
        ms_fmt(l.max),
        hits,
        empty
    );
    for n in &p.notes {
        let _ = writeln!(out, "  {:<16} · {n}", "");
    }
}

pub fn ms_fmt(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.2}")
    } else if ms < 1000.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

fn rate_fmt(r: f64) -> String {
    if r < 100.0 { format!("{r:.1}") } else { format!("{r:.0}") }
}

pub fn bytes_fmt(b: u64) -> String {
    let mib = b as f64 / (1u64 << 20) as f64;
    if mib >= 1024.0 { format!("{:.2} GiB", mib / 1024.0) } else { format!("{mib:.1} MiB") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(ms_fmt(1.234), "1.23");
        assert_eq!(ms_fmt(12.34), "12.3");
        assert_eq!(ms_fmt(1234.5), "1234");
        assert_eq!(bytes_fmt(3 << 20), "3.0 MiB");
        assert_eq!(bytes_fmt(3 << 30), "3.00 GiB");
    }
}
