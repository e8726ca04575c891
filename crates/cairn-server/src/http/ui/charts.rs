//! Charts as inline SVG, drawn on the server: they need no script and no request.

use std::fmt::Write as _;

use super::html::esc;

/// Vertical bars over time (one per label, e.g. a day), with the total in the title.
pub fn columns(title: &str, points: &[(String, i64)]) -> String {
    const WIDTH: f64 = 600.0;
    const HEIGHT: f64 = 120.0;
    let max = points.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1) as f64;
    let step = WIDTH / points.len().max(1) as f64;
    let total: i64 = points.iter().map(|(_, v)| *v).sum();
    let mut svg = format!(
        "<figure class=\"chart\"><figcaption>{} ({total})</figcaption>\
         <svg viewBox=\"0 0 {WIDTH} {}\" role=\"img\" aria-label=\"{}\" preserveAspectRatio=\"none\">",
        esc(title),
        HEIGHT + 14.0,
        esc(title)
    );
    for (i, (label, value)) in points.iter().enumerate() {
        let h = (*value as f64 / max) * HEIGHT;
        let x = i as f64 * step;
        let _ = write!(
            svg,
            "<rect class=\"bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"><title>{}: {value}</title></rect>",
            x + step * 0.1,
            HEIGHT - h,
            step * 0.8,
            h.max(if *value > 0 { 1.0 } else { 0.0 }),
            esc(label)
        );
    }
    if let (Some((first, _)), Some((last, _))) = (points.first(), points.last()) {
        let _ = write!(
            svg,
            "<text x=\"0\" y=\"{}\" class=\"axis\">{}</text><text x=\"{WIDTH}\" y=\"{}\" class=\"axis\" text-anchor=\"end\">{}</text>",
            HEIGHT + 12.0,
            esc(first),
            HEIGHT + 12.0,
            esc(last)
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

/// Horizontal bars, one per category, with their values written out (readable as text too).
pub fn bars(title: &str, rows: &[(String, u64, String)]) -> String {
    const WIDTH: f64 = 600.0;
    const ROW: f64 = 22.0;
    const LABEL: f64 = 150.0;
    let max = rows.iter().map(|(_, v, _)| *v).max().unwrap_or(0).max(1) as f64;
    let height = ROW * rows.len().max(1) as f64;
    let mut svg = format!(
        "<figure class=\"chart\"><figcaption>{}</figcaption>\
         <svg viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"{}\">",
        esc(title),
        esc(title)
    );
    if rows.is_empty() {
        let _ = write!(svg, "<text x=\"0\" y=\"15\" class=\"axis\">nothing yet</text>");
    }
    for (i, (label, value, shown)) in rows.iter().enumerate() {
        let y = i as f64 * ROW;
        let w = (*value as f64 / max) * (WIDTH - LABEL - 90.0);
        let _ = write!(
            svg,
            "<text x=\"0\" y=\"{:.1}\" class=\"label\">{}</text>\
             <rect class=\"bar\" x=\"{LABEL}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\" class=\"value\">{}</text>",
            y + 15.0,
            esc(label),
            y + 3.0,
            w.max(1.0),
            ROW - 6.0,
            LABEL + w + 6.0,
            y + 15.0,
            esc(shown)
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

/// How full a context window is, as a meter with the compactions listed under it.
pub fn gauge(title: &str, percent: u64) -> String {
    let percent = percent.min(100);
    format!(
        "<figure class=\"chart\"><figcaption>{} ({percent}%)</figcaption>\
         <svg viewBox=\"0 0 600 20\" role=\"img\" aria-label=\"{} {percent} percent\">\
         <rect class=\"track\" x=\"0\" y=\"0\" width=\"600\" height=\"20\"></rect>\
         <rect class=\"bar\" x=\"0\" y=\"0\" width=\"{}\" height=\"20\"></rect></svg></figure>",
        esc(title),
        esc(title),
        percent * 6
    )
}

/// Context in use at the end of each turn against the window, as a line; compacted turns are
/// marked with a dashed rule.
pub fn context_over_turns(points: &[(i64, u64)], limit: u64, compacted: &[i64]) -> String {
    const WIDTH: f64 = 600.0;
    const HEIGHT: f64 = 140.0;
    let title = "Context in use per turn";
    let limit = limit.max(points.iter().map(|(_, used)| *used).max().unwrap_or(1)).max(1) as f64;
    let (first, last) = match (points.first(), points.last()) {
        (Some(f), Some(l)) => (f.0, l.0),
        _ => return format!("<p class=\"muted\">{title}: no answer with token usage recorded.</p>"),
    };
    let span = (last - first).max(1) as f64;
    let x = |turn: i64| (turn - first) as f64 / span * WIDTH;
    let y = |used: u64| HEIGHT - used as f64 / limit * HEIGHT;
    let mut svg = format!(
        "<figure class=\"chart\"><figcaption>{title} (window {} tokens; dashed: compactions)</figcaption>\
         <svg viewBox=\"0 -4 {WIDTH} {}\" role=\"img\" aria-label=\"{title}\" preserveAspectRatio=\"none\">",
        limit as u64,
        HEIGHT + 20.0
    );
    for turn in compacted {
        let _ = write!(
            svg,
            "<line class=\"compaction\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"0\" y2=\"{HEIGHT}\"><title>compacted in turn {turn}</title></line>",
            x(*turn)
        );
    }
    let line: Vec<String> = points.iter().map(|(turn, used)| format!("{:.1},{:.1}", x(*turn), y(*used))).collect();
    let _ = write!(svg, "<polyline class=\"line\" points=\"{}\"></polyline>", line.join(" "));
    for (turn, used) in points {
        let _ = write!(
            svg,
            "<circle class=\"dot\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\"><title>turn {turn}: {used} tokens</title></circle>",
            x(*turn),
            y(*used)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"0\" y=\"{0}\" class=\"axis\">turn {first}</text><text x=\"{WIDTH}\" y=\"{0}\" class=\"axis\" text-anchor=\"end\">turn {last}</text></svg></figure>",
        HEIGHT + 14.0
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_in_charts() {
        let svg = bars("types", &[("<b>".into(), 3, "3".into())]);
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>"));
        let svg = columns("per day", &[("2026-01-01".into(), 0), ("2026-01-02".into(), 4)]);
        assert!(svg.contains("per day (4)") && svg.contains("<title>2026-01-02: 4</title>"));
    }

    #[test]
    fn context_chart_marks_compacted_turns() {
        let svg = context_over_turns(&[(1, 100), (2, 150), (3, 20)], 200, &[2]);
        assert!(svg.contains("<title>compacted in turn 2</title>") && svg.contains("<title>turn 3: 20 tokens</title>"));
        assert!(context_over_turns(&[], 200, &[]).contains("no answer"));
    }
}
