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

#[test]
fn a_reply_that_rules_out_the_suspect_and_goes_on_to_the_cause_is_a_diagnosis() {
    let saved = diagnoses(&said(&[
        (Role::User, "The badge said Closed all morning. Is the CDN caching it?"),
        (Role::Assistant, "(ran bash: curl -I https://example.test/status)"),
        (
            Role::Assistant,
            "Not the cache: every request comes back with open=true. The data arrives and the widget \
             doesn't redraw. refresh() changed a field inside the object, so Lit saw the same object.",
        ),
        (Role::User, "Fix it."),
        (Role::Assistant, "refresh() now assigns a new object, so the badge redraws. Tested by flipping the flag."),
    ]));
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(
        saved[0].content,
        "Not the cache: every request comes back with open=true. The data arrives and the widget doesn't \
         redraw. refresh() changed a field inside the object, so Lit saw the same object. refresh() now \
         assigns a new object, so the badge redraws. Tested by flipping the flag."
    );
    assert_eq!(saved[0].message_ids, ["m2", "m4"]);
}

#[test]
fn every_way_of_ruling_out_a_suspect_opens_a_diagnosis() {
    for opener in [
        "It isn't the cache: the query, run fresh, also gives 311.",
        "The export is fine; the plugin picks the wrong part.",
        "The SSD is healthy, no errors at all.",
        "The relay isn't the problem.",
        "No image updater involved.",
        "Nobody deleted them: they're closed, not gone.",
        "Rounding isn't it: every entry has its full duration.",
        "Both models give the same nonsense, so it isn't the retrain.",
        "That isn't oscillation.",
        "Not Python.",
    ] {
        let reply = format!("{opener} The join drops runs whose rider is missing.");
        assert_eq!(
            contents(&[(Role::User, "Why?"), (Role::Assistant, &reply)]),
            std::slice::from_ref(&reply),
            "{opener:?}"
        );
    }
}

#[test]
fn an_opener_that_rules_out_nothing_or_a_search_still_going_saves_nothing() {
    for reply in [
        "It's not a good idea. Coupling a 41-atom group on its own gives a noisy temperature.",
        "Not yet. I'll finish the migration first.",
        "The CSV is fine: all 20 clubs. So the rows went in. Let me look at how the script fills the frame.",
        "The tests pass. The build takes 3 minutes.",
    ] {
        assert!(contents(&[(Role::User, "Why?"), (Role::Assistant, reply)]).is_empty(), "{reply:?}");
    }
}

#[test]
fn a_cause_the_agent_says_it_found_wins_over_an_earlier_suspect_ruled_out() {
    let turns = [
        (Role::User, "The stream lags more every hour. Is the 4G slow?"),
        (Role::Assistant, "The uplink is fine: a steady 3.3 Mbit/s. A growing gap means two clocks."),
        (Role::Assistant, "Found it. The encoder runs on the camera's clock, 0.1% fast."),
    ];
    assert_eq!(contents(&turns), ["The encoder runs on the camera's clock, 0.1% fast."]);
}

#[test]
fn a_reply_to_the_developers_next_question_is_no_fix() {
    let turns = [
        (Role::User, "The right wing moves when I drag the left one."),
        (
            Role::Assistant,
            "Found it. Every slider is labelled 'Height', so they share one ImGui ID; each has its own now.",
        ),
        (Role::User, "Good. How fast can a winch go at the moment?"),
        (Role::Assistant, "rig.ini has max_speed = 400 for every winch."),
    ];
    assert_eq!(
        contents(&turns),
        ["Every slider is labelled 'Height', so they share one ImGui ID; each has its own now."]
    );
    // A request is a go-ahead: its reply is the fix.
    let asked_to_fix = [
        (Role::User, "The right wing moves when I drag the left one."),
        (Role::Assistant, "Found it. Every slider is labelled 'Height', so they share one ImGui ID."),
        (Role::User, "Can you fix it?"),
        (Role::Assistant, "Each winch's slider has its own ID now."),
    ];
    assert_eq!(
        contents(&asked_to_fix),
        ["Every slider is labelled 'Height', so they share one ImGui ID. Each winch's slider has its own ID now."]
    );
}

#[test]
fn a_fix_the_agent_made_in_the_diagnosing_reply_is_kept_with_it() {
    let saved = diagnoses(&said(&[
        (Role::User, "One press of Call sends the number to the screens four times. Is the Stream Deck bouncing?"),
        (
            Role::Assistant,
            "Found it. Every time the Call key appears, onWillAppear adds another key-down listener. The key \
             appears again each time the caller leaves the Specials page. So after three games there are four \
             listeners. That's why it's fine early and bad later. The press is now handled once, in onKeyDown. \
             I've tested it by switching pages ten times.",
        ),
        (Role::User, "Blimey. How long does a number stay up on the screens?"),
        (Role::Assistant, "holdSeconds is 4."),
    ]));
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(
        saved[0].content,
        "Every time the Call key appears, onWillAppear adds another key-down listener. The key appears again \
         each time the caller leaves the Specials page. The press is now handled once, in onKeyDown. I've \
         tested it by switching pages ten times."
    );
    assert_eq!(saved[0].message_ids, ["m1"], "the developer's question took no fix from the next reply");
}

#[test]
fn a_reply_that_rules_out_the_suspect_keeps_the_change_it_made() {
    let contents = contents(&[
        (Role::User, "Taps land in the wrong place on the new touchscreen. Bad calibration?"),
        (
            Role::Assistant,
            "It's not the calibration. The game draws into a 1280x720 target and scales it up. The old screen \
             was 1280x720. Touches arrive in the screen's pixels but buttons are tested in the small layout. \
             I've made TouchInput map every touch through the inverse of the scaling matrix. A scripted test \
             taps every button at both sizes.",
        ),
    ]);
    assert_eq!(contents.len(), 1);
    assert!(contents[0].ends_with("I've made TouchInput map every touch through the inverse of the scaling matrix. A scripted test taps every button at both sizes."), "{contents:?}");
    // A reply that says no change keeps only its diagnosis.
    let unchanged = super::change_in_same_reply(
        "Found it. The cache is stale. It is refreshed hourly. Nothing else to see.",
        &["The cache is stale.".to_owned(), "It is refreshed hourly.".to_owned(), "Nothing else to see.".to_owned()],
    );
    assert!(unchanged.is_empty(), "{unchanged:?}");
}
