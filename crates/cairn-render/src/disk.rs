//! Where the bytes of a data dir are, for people (`cairn stats`, the web page's chart).

use std::fmt::Write as _;

use cairn_core::store::disk_use::DiskUse;

/// The parts of a data dir with their sizes, largest first, empty ones left out.
#[must_use]
pub fn parts(d: &DiskUse) -> Vec<(&'static str, u64)> {
    let mut parts = vec![
        ("memories", d.memories_bytes),
        ("vectors", d.vectors_bytes),
        ("search index", d.search_index_bytes),
        ("sync and spool", d.sync_bytes),
        ("free (cairn gc)", d.free_bytes),
        ("cairn.db, measuring", d.unsplit_bytes),
        ("WAL", d.wal_bytes),
        ("history archive", d.history_bytes),
        ("history index", d.history_index_bytes),
        ("models", d.models_bytes),
    ];
    parts.retain(|(_, bytes)| *bytes > 0);
    parts.sort_by_key(|(_, bytes)| std::cmp::Reverse(*bytes));
    parts
}

/// The `Disk:` block of `cairn stats`.
#[must_use]
pub fn disk_use(d: &DiskUse) -> String {
    let mut text = format!("Disk:      {} in all\n", bytes(d.total_bytes));
    for (name, size) in parts(d) {
        let _ = writeln!(text, "  {name:<18} {:>10}", bytes(size));
    }
    for warning in &d.warnings {
        let _ = writeln!(text, "  warning: {}", warning_line(warning));
    }
    text
}

/// A cap nearly reached, in one line with what to do.
#[must_use]
pub fn warning_line(w: &cairn_core::store::disk_use::DiskWarning) -> String {
    let (section, key) = w.cap.split_once('.').unwrap_or(("", &w.cap));
    format!(
        "{} % of [{section}] {key} ({} of {}); hint: {}",
        w.percent,
        bytes(w.used_bytes),
        bytes(w.cap_bytes),
        w.hint
    )
}

/// A byte count for people, in powers of 1024.
#[must_use]
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_lists_the_parts_largest_first_and_skips_empty_ones() {
        let d = DiskUse {
            total_bytes: 3_000_000,
            memories_bytes: 1_000_000,
            vectors_bytes: 2_000_000,
            ..DiskUse::default()
        };
        assert_eq!(
            disk_use(&d),
            "Disk:      2.9 MB in all\n  vectors                1.9 MB\n  memories             976.6 KB\n"
        );
    }
}
