use super::*;
use crate::extract::taken_back::tests::said;

fn contents(turns: &[(Role, &str)]) -> Vec<String> {
    diagnoses(&said(turns)).into_iter().map(|d| d.content).collect()
}

#[test]
fn the_cause_the_agent_found_is_saved_with_the_fix_that_followed() {
    let saved = diagnoses(&said(&[
        (Role::User, "The boat moves twice as fast on the new screen. I think the PC is too fast."),
        (Role::Assistant, "Let me look at the main loop."),
        (
            Role::Assistant,
            "Found it. Movement is per frame and clock.tick() has no cap, so on the 120 Hz screen the loop \
             runs twice as often. On the old 60 Hz screen it happened to look right. The sprites are fine.",
        ),
        (Role::User, "Do it properly with delta time."),
        (
            Role::Assistant,
            "Done: clock.tick(60) returns dt and speeds are in pixels per second. Both screens take 11.2 s.",
        ),
        (Role::User, "Thanks."),
    ]));
    assert_eq!(saved.len(), 1, "{saved:?}");
    let bug = &saved[0];
    assert_eq!(
        bug.content,
        "Movement is per frame and clock.tick() has no cap, so on the 120 Hz screen the loop runs twice as \
         often. On the old 60 Hz screen it happened to look right. Done: clock.tick(60) returns dt and speeds \
         are in pixels per second. Both screens take 11.2 s."
    );
    assert_eq!((bug.origin, bug.kind.as_str()), (Origin::Diagnosis, "bugfix"));
    assert_eq!(bug.message_ids, ["m2", "m4"], "the diagnosis and the fix");
}

#[test]
fn a_cause_said_in_its_own_sentence_keeps_it() {
    assert_eq!(
        contents(&[
            (Role::User, "The dewpoint is nonsense."),
            (Role::Assistant, "The problem is units. WeeWX keeps the database in US units. The hygrometer is fine."),
        ]),
        ["The problem is units. WeeWX keeps the database in US units. The hygrometer is fine."]
    );
}

#[test]
fn a_guess_or_no_cause_saves_nothing() {
    for reply in [
        "A clock that loses minutes sounds like drift; let me check.",
        "Missing letters usually means the host drops keystrokes that arrive too fast.",
        "The database is fine: every connection still says what it said last week.",
        "So the radio side works and the problem is between the decoder and the map. Let me look at its log.",
    ] {
        assert!(contents(&[(Role::User, "It's broken."), (Role::Assistant, reply)]).is_empty(), "{reply:?}");
    }
    // Before the developer has said anything, the agent diagnoses nothing.
    assert!(contents(&[(Role::Assistant, "Found it. The cache was stale.")]).is_empty());
    // What was private is never copied.
    let private = format!("Found it. The key {} was rotated.", crate::text::REDACTED);
    assert!(contents(&[(Role::User, "Why?"), (Role::Assistant, &private)]).is_empty());
}

#[test]
fn a_diagnosis_after_a_reply_still_looking_is_read_from_where_it_was_found() {
    let turns = [
        (Role::User, "The map shows the sheep an hour late."),
        (Role::Assistant, "The problem is between the decoder and the map. Let me look at the log."),
        (
            Role::Assistant,
            "(ran bash: journalctl -u flockmap)\nThere it is: the tracker ships positions every 30 minutes.",
        ),
        (Role::User, "Can it ship them sooner?"),
        (Role::Assistant, "(ran edit: tracker.conf)\nSet the interval to 5 minutes."),
    ];
    assert_eq!(
        contents(&turns),
        ["There it is: the tracker ships positions every 30 minutes. Set the interval to 5 minutes."],
        "tool notes are no part of it"
    );
}
