use super::*;
use crate::extract::taken_back::tests::said;

fn contents(turns: &[(Role, &str)]) -> Vec<String> {
    settings(&said(turns)).into_iter().map(|s| s.content).collect()
}

#[test]
fn a_value_set_in_a_few_words_is_saved_as_the_reply_confirms_it() {
    let saved = settings(&said(&[
        (Role::User, "How long does a basket hold its seats at the moment?"),
        (Role::Assistant, "HOLD_MINUTES in src/basket.ts is 30."),
        (Role::User, "Far too long on a busy night. Make it 12."),
        (Role::Assistant, "HOLD_MINUTES is 12 now; the basket shows a countdown. Anything else?"),
        (Role::User, "Lovely, thanks."),
    ]));
    assert_eq!(saved.len(), 1, "{saved:?}");
    let setting = &saved[0];
    assert_eq!(setting.content, "HOLD_MINUTES is 12 now; the basket shows a countdown.");
    assert_eq!(setting.title, "HOLD_MINUTES is 12 now; the basket shows a countdown");
    assert_eq!((setting.origin, setting.kind.as_str()), (Origin::Setting, "config"));
    assert_eq!(setting.message_ids, ["m2", "m3"], "the developer's message and the reply");
}

#[test]
fn every_shape_of_a_setting_name_counts() {
    for (set, reply) in [
        ("20 per page.", "pagination.per_page is 20 now."),
        ("Lower it to 0.4.", "Set minConfidence to 0.4 in detect.py."),
        ("45 then.", "`timeout=45` in the queue config, reloaded."),
        ("3 for every room.", "MAX_BOOKINGS_PER_ROOM = 3; the form greys out a full room."),
        ("85.", "HighLevel is 85% now."),
        ("Make it 14.", "Done, the threshold is 14 now."),
        ("That's out. 160.", "Camping pitches is 160."),
    ] {
        assert_eq!(contents(&[(Role::User, set), (Role::Assistant, reply)]), [reply], "{set:?}");
    }
}

#[test]
fn a_reply_that_names_no_setting_or_another_value_saves_nothing() {
    for (set, reply) in [
        ("Make it 14.", "Set both to 14."),
        ("Make it 14.", "It is 14 now."),
        ("Make it 14.", "The threshold for the night shift when the hall is busy is 14 now."),
        ("Make it 14.", "MAX_DAYS was 10; I changed the default."),
        ("What's MAX_DAYS set to, 10?", "MAX_DAYS is 10."),
        (
            "I looked at the dashboard this morning and the numbers were off by about 3 again, any idea why?",
            "MAX_DAYS is 3.",
        ),
    ] {
        assert!(contents(&[(Role::User, set), (Role::Assistant, reply)]).is_empty(), "{set:?} / {reply:?}");
    }
    // The agent's own figures, with no value the developer set, are no setting.
    assert!(contents(&[(Role::Assistant, "CACHE_TTL is 60 in settings.py.")]).is_empty());
}

#[test]
fn a_value_set_and_then_set_again_saves_only_the_last() {
    let saved = contents(&[
        (Role::User, "Make it 30."),
        (Role::Assistant, "SERVICE_MINUTES is 30 now."),
        (Role::User, "Hmm, no, that pushes too many stops to next week. 20 then."),
        (Role::Assistant, "SERVICE_MINUTES is 20 now."),
    ]);
    assert_eq!(saved, ["SERVICE_MINUTES is 20 now."]);
    // Rejected by name in the next message, beside the new value.
    let saved = contents(&[
        (Role::User, "The committee wants it tighter. Make it 10."),
        (Role::Assistant, "limit_min is 10 for the Open."),
        (Role::User, "Archie says 10 is unfair on the big dogs. Twelve for the Open, leave the others at 8."),
    ]);
    assert!(saved.is_empty(), "{saved:?}");
}

#[test]
fn a_setting_changed_again_later_is_not_saved() {
    let saved = contents(&[
        (Role::User, "Make it 800 max."),
        (Role::Assistant, "setMaxSpeed(800) now."),
        (Role::User, "Still too quick next to a loco at scale speed, halve it again and leave the acceleration."),
        (Role::Assistant, "setMaxSpeed(400) steps/s, acceleration unchanged."),
    ]);
    assert!(saved.is_empty(), "{saved:?}");
    // A later reply naming the same value again keeps it.
    let saved = contents(&[
        (Role::User, "Make it 800 max."),
        (Role::Assistant, "setMaxSpeed(800) now."),
        (Role::User, "Great, ship it."),
        (Role::Assistant, "Built with setMaxSpeed(800) and uploaded."),
    ]);
    assert_eq!(saved, ["setMaxSpeed(800) now."]);
}

#[test]
fn a_private_reply_or_a_long_explanation_is_no_setting() {
    let private = format!("API_RETRIES is 5 {}.", crate::text::REDACTED);
    assert!(contents(&[(Role::User, "Make it 5."), (Role::Assistant, &private)]).is_empty());
    let long = format!("API_RETRIES is 5 now, {}.", "and here is why that matters ".repeat(12));
    assert!(contents(&[(Role::User, "Make it 5."), (Role::Assistant, &long)]).is_empty());
}

#[test]
fn a_value_said_in_words_or_set_inside_a_longer_sentence_counts() {
    let saved = contents(&[
        (Role::User, "When is a bridge due another inspection?"),
        (Role::Assistant, "INSPECT_YEARS in tools/due.py is 10, which flags 80 bridges."),
        (Role::User, "Far too long. Seven years."),
        (Role::Assistant, "INSPECT_YEARS is 7: 212 bridges are flagged, listed in out/due.csv."),
    ]);
    assert_eq!(saved, ["INSPECT_YEARS is 7: 212 bridges are flagged, listed in out/due.csv."]);
    let saved = contents(&[
        (Role::User, "Let it go down to 20 then."),
        (Role::Assistant, "FONT_MIN is 20."),
        (
            Role::User,
            "Unreadable on a phone. Make the minimum 28, and if a title still overflows at 28 the plugin should tell me.",
        ),
        (Role::Assistant, "FONT_MIN is 28, and a title that overflows at 28 is outlined in red and listed."),
    ]);
    assert_eq!(saved, ["FONT_MIN is 28, and a title that overflows at 28 is outlined in red and listed."]);
}
