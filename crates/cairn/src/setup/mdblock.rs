//! cairn's block in a Markdown file the user may also write in (Gemini CLI's global
//! `GEMINI.md`): between two marker lines, replaced in place, removed whole by uninstall.

use std::path::Path;

use anyhow::Result;

use super::{FileOp, Plan, Status, Step, read_config};

pub const BEGIN: &str = "<!-- cairn:begin: written by `cairn setup`, removed by `cairn setup --uninstall` -->";
pub const END: &str = "<!-- cairn:end -->";

/// `text` with cairn's block set to `body` (appended after a blank line when it is not there).
pub fn with_block(text: &str, body: &str) -> String {
    let block = format!("{BEGIN}\n{}\n{END}", body.trim_end());
    if let Some((start, end)) = find(text) {
        return format!("{}{block}{}", &text[..start], &text[end..]);
    }
    match text {
        "" => format!("{block}\n"),
        t if t.ends_with('\n') => format!("{t}\n{block}\n"),
        t => format!("{t}\n\n{block}\n"),
    }
}

/// `text` without cairn's block (and the blank line and newline [`with_block`] added).
pub fn without_block(text: &str) -> Option<String> {
    let (start, mut end) = find(text)?;
    if text[end..].starts_with('\n') {
        end += 1;
    }
    let head = &text[..start];
    let head = head.strip_suffix("\n\n").map_or_else(|| head.to_string(), |h| format!("{h}\n"));
    Some(format!("{head}{}", &text[end..]))
}

/// The byte range of the block, from its first marker to the end of its last.
fn find(text: &str) -> Option<(usize, usize)> {
    let start = text.find(BEGIN)?;
    let end = text[start..].find(END)? + start + END.len();
    Some((start, end))
}

/// Plan cairn's block in `path` (`item` names the step).
pub fn plan(plan: &mut Plan, item: &str, path: &Path, body: &str, uninstall: bool) -> Result<()> {
    let before = read_config(path)?;
    if uninstall {
        match before.as_deref().and_then(without_block) {
            Some(after) => {
                plan.steps.push(Step::new(item, Status::Removed, Some(path)));
                plan.ops.push(if after.is_empty() {
                    FileOp::Remove { path: path.to_path_buf() }
                } else {
                    FileOp::Write { path: path.to_path_buf(), contents: after.into_bytes() }
                });
            }
            None => plan.steps.push(Step::new(item, Status::Absent, Some(path))),
        }
        return Ok(());
    }
    let after = with_block(before.as_deref().unwrap_or(""), body);
    let status = match &before {
        None => Status::Created,
        Some(b) if *b == after => Status::Unchanged,
        Some(b) if find(b).is_some() => Status::Updated,
        Some(_) => Status::Created,
    };
    plan.steps.push(Step::new(item, status, Some(path)));
    if status != Status::Unchanged {
        plan.ops.push(FileOp::Write { path: path.to_path_buf(), contents: after.into_bytes() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_goes_in_and_out_leaving_the_users_text_as_it_was() {
        for original in ["", "# Mine\n\nrules\n", "no newline at the end\n", "two\n\n"] {
            let with = with_block(original, "the protocol\n");
            assert!(with.contains(&format!("{BEGIN}\nthe protocol\n{END}\n")), "{with:?}");
            assert_eq!(with_block(&with, "the protocol"), with, "idempotent");
            let newer = with_block(&with, "new text");
            assert!(newer.contains("new text") && !newer.contains("the protocol"), "{newer:?}");
            assert_eq!(without_block(&newer).as_deref(), Some(original), "{original:?}");
        }
        assert_eq!(without_block("nothing of ours"), None);
    }
}
