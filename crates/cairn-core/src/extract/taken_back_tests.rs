use super::*;

/// A conversation of `turns`, its messages' ids `m0`, `m1`, ….
pub(in crate::extract) fn said(turns: &[(Role, &str)]) -> Vec<TranscriptMessage> {
    turns
        .iter()
        .enumerate()
        .map(|(i, (role, text))| TranscriptMessage { id: format!("m{i}"), role: *role, text: (*text).to_owned() })
        .collect()
}

/// A green band read as 15, rejected for 5, and 5 taken back for 10 in the next message.
fn pacer() -> Vec<TranscriptMessage> {
    said(&[
        (Role::User, "What's the green band set to?"),
        (Role::Assistant, "toleranceSeconds defaults to 15 in settings.xml, so 15 seconds either side is green."),
        (Role::User, "15 is way too loose for a pacer. Make it 5."),
        (Role::Assistant, "5 will flicker with GPS jitter; I'd suggest 10."),
        (Role::User, "Ugh, OK. 10 then."),
        (Role::Assistant, "Done: toleranceSeconds is 10."),
    ])
}

#[test]
fn a_value_named_and_taken_back_is_stale() {
    let pacer = pacer();
    for stale in [
        "The green band is set to 5 seconds.",
        "The settings default for toleranceSeconds is 15 seconds.",
        "The green band was 15 seconds, too loose; it is now 5 seconds.",
    ] {
        assert!(names_a_value_taken_back(stale, &pacer), "{stale:?}");
    }
    // Rejected and replaced in one message, the new value closing its choice or set.
    let sump = said(&[(Role::User, "2.0 is far too late. The top pump cuts in at 1.6. 1.7 for every station.")]);
    assert!(names_a_value_taken_back("The high sump alarm fires above 2.0 m.", &sump));
    let traps = said(&[(Role::User, "A lot of people use 0.5... no, 0.5 would lose the martens. Go 0.35.")]);
    assert!(names_a_value_taken_back("The detection threshold is 0.5.", &traps));
    let band =
        said(&[(Role::User, "Give the caller 2 shares."), (Role::User, "Hmm. No: make it 1.5 shares for the caller.")]);
    assert!(names_a_value_taken_back("The caller gets 2 shares of the fee.", &band));
}

#[test]
fn the_value_kept_and_a_change_told_whole_are_not_stale() {
    let pacer = pacer();
    for kept in [
        "The green band is ±10 seconds (toleranceSeconds 10).",
        "toleranceSeconds is 10, was 15; 5 would flicker.",
        "The big number is the signed delta in seconds, like +12.",
        "Pacers press lap at every marker.",
    ] {
        assert!(!names_a_value_taken_back(kept, &pacer), "{kept:?}");
    }
    // Another setting in the next message, of another unit: both values stand.
    let buffer = said(&[
        (Role::User, "Still losing some. Just go 8 MB, memory is no problem."),
        (Role::User, "Now the threshold: make 10 ms the default."),
    ]);
    assert!(!names_a_value_taken_back("The ring buffer is 8 MB.", &buffer));
    // A value the agent alone named and nobody took back; a time, a version and a count.
    let plain = said(&[
        (Role::Assistant, "Too many retries: 5. Make it 3?"),
        (Role::User, "The job runs at 1:15 on 2.6.1, and 6,870 labels are left. Make it 3 then."),
    ]);
    for kept in ["The job runs at 1:15.", "It runs on version 2.6.1.", "6,870 labels are left."] {
        assert!(!names_a_value_taken_back(kept, &plain), "{kept:?}");
    }
}
