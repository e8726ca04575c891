use super::*;
use crate::extract::taken_back::tests::said;

fn settings(messages: &[TranscriptMessage]) -> Vec<Extracted> {
    read(messages).memories
}

fn names_a_value_replaced(content: &str, messages: &[TranscriptMessage]) -> bool {
    read(messages).names_a_value_replaced(content)
}

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
        ("10 daily then.", "keep-daily is 10 on the garage datastore; keep-weekly stays at 4."),
        ("Make it 14.", "Done, the threshold is 14 now."),
        ("That's out. 160.", "Camping pitches is 160."),
        ("Hmm, the fans run nonstop. Make it 1000.", "High CO2 is now above 1000 ppm, cleared under 900."),
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

/// A value set again is often confirmed in words that name no setting ("Set to 7 and
/// published."): the sentence that confirmed the value before names it, with the new value.
#[test]
fn a_value_set_again_and_confirmed_without_its_name_takes_the_name_from_before() {
    let saved = contents(&[
        (Role::User, "8 is too high. Make it 6."),
        (Role::Assistant, "refer_flag now says yes from a risk score of 6, published as form version 2025.11.2."),
        (Role::User, "141?! That won't fly. 7 then, and they'll tell me if it's too many."),
        (Role::Assistant, "Set to 7 and published as 2025.11.3. Last month that would have been 58 referrals."),
    ]);
    assert_eq!(saved, ["refer_flag now says yes from a risk score of 7 (was 6). Set to 7 and published as 2025.11.3."]);
    // Named before only in words, with "now"; the unit agrees with the new value.
    let saved = contents(&[
        (Role::User, "14 days is mad, everybody needs those. 3 days."),
        (Role::Assistant, "PRAC loans are 3 days now; the renewals are unchanged."),
        (Role::User, "The senior clerk says overnight. Make it 1 day."),
        (Role::Assistant, "Changed to 1 day."),
    ]);
    assert_eq!(saved, ["PRAC loans are 1 day now (was 3). Changed to 1 day."]);
    let saved = contents(&[
        (Role::User, "30 isn't long enough. 90 days."),
        (Role::Assistant, "The trash keeps things for 90 days now."),
        (Role::User, "Hmm. That disk is the one thing I can't replace. 60 days then."),
        (Role::Assistant, "Set to 60 days, which is about 140 GB of trash."),
    ]);
    assert_eq!(
        saved,
        ["The trash keeps things for 60 days now (was 90). Set to 60 days, which is about 140 GB of trash."]
    );
    // A unit written on the number stays on the value replaced.
    let saved = contents(&[
        (Role::User, "Let's do 200M for the scans."),
        (Role::Assistant, "upload_max_filesize and post_max_size are 200M, set in php.ini."),
        (Role::User, "Hmm, the disk. 100M then."),
        (Role::Assistant, "100M for both, reloaded."),
    ]);
    assert_eq!(saved, ["upload_max_filesize and post_max_size are 100M (was 200M). 100M for both, reloaded."]);
    // A reply that names the setting again says it all.
    let saved = contents(&[
        (Role::User, "45 seconds feels endless. 20."),
        (Role::Assistant, "Wash Minutes is 20."),
        (Role::User, "Testers say it's too short now. 30."),
        (Role::Assistant, "Wash Minutes is 30 now; the drying stays at 30 as it was, untouched."),
    ]);
    assert_eq!(saved, ["Wash Minutes is 30 now; the drying stays at 30 as it was, untouched."]);
}

#[test]
fn a_value_set_again_takes_no_name_from_a_sentence_that_only_weighed_it() {
    // "With 30 minutes, … would fit" weighed a value; it set nothing, and names nothing.
    let saved = contents(&[
        (Role::User, "Way too tight. Make it 30."),
        (Role::Assistant, "With 30 minutes, Thursday's bookings would fit 7 of the 11 collections now."),
        (Role::User, "Hmm, no. 20 then."),
        (Role::Assistant, "Set to 20."),
    ]);
    assert!(saved.is_empty(), "{saved:?}");
    // Nor for another setting set in the next message.
    let saved = contents(&[
        (Role::User, "Make it 30."),
        (Role::Assistant, "SERVICE_MIN is 30."),
        (Role::User, "Thanks. The vans both passed their MOT today by the way. Retries: 3."),
        (Role::Assistant, "Set to 3."),
    ]);
    // The retries are no SERVICE_MIN; and a value said bare right after may have replaced 30,
    // so that is not kept either.
    assert!(saved.is_empty(), "{saved:?}");
}

#[test]
fn a_value_said_before_change_it_or_with_its_unit_on_it_counts() {
    let saved = contents(&[
        (Role::User, "35 is wrong for the Crème. Our EHO said 28 days from make at the last audit. Change it."),
        (
            Role::Assistant,
            "shelfLifeDays is 28 for Dulas Crème, so a batch made today prints a best-before 28 days on.",
        ),
    ]);
    assert_eq!(saved, ["shelfLifeDays is 28 for Dulas Crème, so a batch made today prints a best-before 28 days on."]);
    let saved = contents(&[
        (Role::User, "For listening online that's plenty. So set the limit for MP3s, 200M's plenty."),
        (Role::Assistant, "upload_max_filesize and post_max_size are 200M, set in the php.ini template."),
    ]);
    assert_eq!(saved, ["upload_max_filesize and post_max_size are 200M, set in the php.ini template."]);
    // 3.0 is the 3 the developer set; a macro's dotted name is a setting's name.
    for (set, reply) in [
        ("Dewi says the heaters switch on at 5. 3 then.", "LOW_TEMP_C is 3.0, built as v18 and rolled out."),
        ("1.7 for every station.", "{$SUMP.HIGH} is 1.7 in the template, with no host overrides."),
    ] {
        assert_eq!(contents(&[(Role::User, set), (Role::Assistant, reply)]), [reply], "{set:?}");
    }
}

#[test]
fn a_next_message_that_only_describes_a_thing_sets_nothing_again() {
    let saved = contents(&[
        (Role::User, "Actually no, adopters keep sending photos in for months. 90 days."),
        (Role::Assistant, "ADOPTED_ARCHIVE_DAYS=90, restarted."),
        (Role::User, "How much disk are all the photos using? It's only a 40 GB box."),
        (Role::Assistant, "None of it: the photos go to a B2 bucket."),
    ]);
    assert_eq!(saved, ["ADOPTED_ARCHIVE_DAYS=90, restarted."]);
}

#[test]
fn a_next_message_that_turns_to_something_else_sets_nothing_again() {
    let saved = contents(&[
        (Role::User, "Twelve! We'd have hardly any beans to lend. 70 then, and we'll tell people to sow extra."),
        (Role::Assistant, "min_germination is 70: 5 batches are below it now."),
        (Role::User, "Next thing. I want the whole family tree, back to the packet we started with in 2019."),
        (Role::Assistant, "Done."),
    ]);
    assert_eq!(saved, ["min_germination is 70: 5 batches are below it now."]);
}

#[test]
fn weeks_said_are_the_days_a_reply_gives_and_the_value_set_again_replaces_them() {
    let turns = [
        (Role::User, "When does the reminder go out?"),
        (Role::Assistant, "The reminder goes 30 days before the deadline, by email."),
        (Role::User, "Too early, people forget. Two weeks."),
        (Role::Assistant, "The reminder now goes 14 days before the deadline."),
        (Role::User, "Hmm, no. Some people post a cheque. 21 days."),
        (Role::Assistant, "21 days before the deadline, then. For December that's the 10th."),
    ];
    assert_eq!(
        contents(&turns),
        ["The reminder now goes 21 days before the deadline (was 14). 21 days before the deadline, then."]
    );
    let said = said(&turns);
    assert!(names_a_value_replaced("The reminder is sent 14 days before the deadline.", &said));
    assert!(!names_a_value_replaced("The reminder goes 21 days before, not 14.", &said), "names the new value");
    assert!(!names_a_value_replaced("The group has 14 contacts.", &said), "another unit");
    assert!(!names_a_value_replaced("The reminder goes by email.", &said), "no number");
}

#[test]
fn a_config_key_opening_the_reply_names_the_setting() {
    let turns = [
        (Role::User, "How many replicas has it got?"),
        (Role::Assistant, "The overlay sets replicas to 2."),
        (Role::User, "Make it 6 for exam week."),
        (Role::Assistant, "replicas: 6 in the overlay, pushed; Argo is syncing it."),
        (Role::User, "Why's it stuck?"),
        (Role::Assistant, "Two pods are Pending: there is memory for four, not six."),
        (Role::User, "Right, 4 then."),
        (Role::Assistant, "replicas: 4, pushed; all four Running."),
    ];
    assert_eq!(contents(&turns), ["replicas: 4, pushed; all four Running."]);
    let said = said(&turns);
    assert!(names_a_value_replaced("The app runs 6 replicas in exam week.", &said), "6 did not last");
    assert!(!names_a_value_replaced("The app runs 4 replicas in exam week.", &said));
    // A capitalised word before a colon is prose, no key: "Result: 3 of them failed."
    assert!(contents(&[(Role::User, "Make it 3."), (Role::Assistant, "Result: 3 of them failed.")]).is_empty());
}

#[test]
fn a_value_is_replaced_only_when_the_same_setting_is_set_again() {
    let set_again = said(&[
        (Role::User, "Make it 15."),
        (Role::Assistant, "LIMIT_MIN is 15 for every class."),
        (Role::User, "Hmm, that's unfair on the big dogs. 12 for the Open."),
        (Role::Assistant, "LIMIT_MIN is 12 for the Open; the others stay."),
    ]);
    assert!(names_a_value_replaced("The class limit is 15 minutes.", &set_again));
    // The next message sets something else; the value stands, as the model wrote it.
    let moved_on = said(&[
        (Role::User, "People wait longer than we thought. Use 45."),
        (Role::Assistant, "patience_minutes is 45. The layout loses 2% of donors."),
        (Role::User, "And every figure is the mean of 200 replications. Never one run."),
        (Role::Assistant, "run.py now defaults to 200 replications."),
    ]);
    assert!(!names_a_value_replaced("Donors wait 45 minutes before giving up.", &moved_on));
}

#[test]
fn a_replaced_value_told_as_history_is_no_stale_memory() {
    let said = said(&[
        (Role::User, "How many days ahead does it list?"),
        (Role::Assistant, "daysAhead is 14 in the sitepackage."),
        (Role::User, "Three weeks for Advent. 21."),
        (Role::Assistant, "daysAhead is 21. On a phone that's 96 services."),
        (Role::User, "Hmm, too long on a phone. 10 days, and Advent gets its own page."),
        (Role::Assistant, "daysAhead is 10 and the cache flushed."),
    ]);
    assert!(names_a_value_replaced("The page lists 21 days ahead.", &said));
    for history in [
        "The page lists 10 days ahead (was 14; 21 was set for Advent and dropped).",
        "The page lists ten days ahead, down from 21.",
        "daysAhead: 21 → 10.",
    ] {
        assert!(!names_a_value_replaced(history, &said), "{history:?}");
    }
}

#[test]
fn a_replaced_value_that_is_another_things_number_keeps_the_memory() {
    let said = said(&[
        (Role::User, "The attract screen comes back too soon. Make it 60."),
        (Role::Assistant, "IDLE_SECONDS = 60 now."),
        (Role::User, "Hmm, parents read the panel too. 90."),
        (Role::Assistant, "IDLE_SECONDS = 90, so the heron comes back after a minute and a half."),
        (Role::User, "Cap the pixel ratio at 2."),
        (Role::Assistant, "PIXEL_RATIO_CAP is 2; the kiosk does 31 fps."),
        (Role::User, "Then 1.5, the rim lighting looks too soft at 1.25."),
        (Role::Assistant, "PIXEL_RATIO_CAP is 1.5 now."),
    ]);
    assert!(names_a_value_replaced("The attract screen returns after 60 seconds.", &said));
    assert!(!names_a_value_replaced("Movement uses delta time from clock.tick(60).", &said), "a call's argument");
    assert!(!names_a_value_replaced("The 4K panel runs at devicePixelRatio 2; the cap is 1.5.", &said));
    assert!(!names_a_value_replaced("Seats are held 12 minutes (was 20, briefly 60).", &said));
}

#[test]
fn a_reply_that_only_echoes_a_number_confirms_nothing() {
    let turns = [
        (Role::User, "What speed do beginners get?"),
        (Role::Assistant, "charWpm is 15 in the defaults."),
        (Role::User, "Too slow for the ear. 20."),
        (Role::Assistant, "charWpm is 20 now."),
        (Role::User, "Hmm, 18 then."),
        (Role::Assistant, "charWpm is 18 now; the lessons start there."),
        (Role::User, "Lovely. That's all for tonight. 73!"),
        (Role::Assistant, "73. Nothing else changed."),
    ];
    // The sign-off still reads as a value set again, so 18 is left to the model; 73 is no setting.
    let saved = contents(&turns);
    assert!(!saved.iter().any(|memory| memory.contains("73")), "{saved:?}");
    let without_sign_off = &turns[..6];
    assert_eq!(contents(without_sign_off), ["charWpm is 18 now; the lessons start there."]);
}

#[test]
fn a_value_that_opens_a_longer_last_sentence_is_set() {
    let saved = contents(&[
        (Role::User, "How long does the PIN stay on screen?"),
        (Role::Assistant, "pinDisplaySeconds in src/config.ts is 20."),
        (
            Role::User,
            "The queue is right behind them. 45, and a 'Hide PIN' button so they can clear it when they're done.",
        ),
        (Role::Assistant, "pinDisplaySeconds is 45, and the PIN screen has a 'Hide PIN' button."),
    ]);
    assert_eq!(saved, ["pinDisplaySeconds is 45, and the PIN screen has a 'Hide PIN' button."]);
    // A count echoed at the start of the message sets nothing.
    let saved = contents(&[
        (Role::User, "Make it 5."),
        (Role::Assistant, "RESURVEY_YEARS is 5. That flags 604 stones."),
        (Role::User, "604, we've got thirty-odd volunteers, that's hopeless. What would 7 flag?"),
    ]);
    assert_eq!(saved, ["RESURVEY_YEARS is 5."]);
}

#[test]
fn a_next_message_that_sets_something_else_leaves_the_value_standing() {
    let saved = contents(&[
        (Role::User, "Ah no, half is too many. 25%, and we'll see after Christmas."),
        (Role::Assistant, "Rollout is 25%. Customers already in the photo group keep their answer."),
        (Role::User, "While I remember: somebody put the collection price in a variant on a flag, £25. Take that out."),
        (Role::Assistant, "The price is now in the settings table in Postgres, and the flag is archived."),
    ]);
    assert_eq!(saved, ["Rollout is 25%."]);
    // The same words name the same setting: the value set after replaces it.
    let saved = contents(&[
        (Role::User, "Half the bookings then, 50%."),
        (Role::Assistant, "The rollout is 50% now."),
        (Role::User, "Hmm, too slow for the vans. 25%, and we'll see."),
        (Role::Assistant, "Rollout is 25%."),
    ]);
    assert_eq!(saved, ["Rollout is 25%."]);
}

#[test]
fn the_value_a_setting_was_read_with_before_it_was_set_is_stale() {
    let said = said(&[
        (Role::User, "How long does the PIN stay on the screen?"),
        (Role::Assistant, "pinDisplaySeconds in src/config.ts is 20. The same file has maxHours at 72."),
        (Role::User, "Too short. 45."),
        (Role::Assistant, "pinDisplaySeconds is 45 now."),
    ]);
    let reading = read(&said);
    assert!(reading.names_a_value_read_before_it_was_set("The PIN display time is set to 20 seconds."));
    // Another figure of the sentences read stands, and the value set stands.
    assert!(!reading.names_a_value_read_before_it_was_set("Lockers can be kept for up to 72 hours."));
    assert!(!reading.names_a_value_read_before_it_was_set("The PIN stays on screen for 45 seconds (was 20)."));
    assert!(!reading.names_a_value_read_before_it_was_set("PINs show for a minute (was a plain 20 seconds)."));
    // It was read, not confirmed and replaced: a bug's account naming it is no stale setting.
    assert!(!reading.names_a_value_replaced("The PIN vanished after 20 seconds, before people saw it."));
}

#[test]
fn a_value_the_reply_gives_in_the_settings_own_unit_and_in_the_developers_words_is_saved() {
    assert_eq!(
        contents(&[
            (Role::User, "Is there a delay on the live table?"),
            (Role::Assistant, "LiveTable:DelaySeconds in appsettings.json is 0."),
            (Role::User, "The marking never takes more than a couple of minutes. Make it 2 minutes."),
            (Role::Assistant, "DelaySeconds is 120: each round score appears two minutes after it's submitted."),
            (Role::User, "Good. Now the rule."),
        ]),
        ["DelaySeconds is 120: each round score appears two minutes after it's submitted."]
    );
    // A number in words that is no value the developer set is no confirmation.
    assert!(
        contents(&[
            (Role::User, "Make it 2 minutes."),
            (Role::Assistant, "DelaySeconds is 120 and RefreshSeconds is one of three options."),
        ])
        .is_empty()
    );
}

#[test]
fn a_setting_named_in_words_with_an_ampersand_or_a_tag_before_its_value_counts() {
    assert_eq!(
        contents(&[
            (Role::User, "What does Reeds & Drones get a month?"),
            (Role::Assistant, "The 'Reeds & Drones' category has a template of £40 a month (#template 40)."),
            (Role::User, "Make it 60, Jamie wants new reeds."),
            (Role::Assistant, "Reeds & Drones is #template 60."),
            (Role::User, "Hmm, we can't do 60. 55, and he can live with it."),
            (Role::Assistant, "Reeds & Drones is #template 55 a month, and December's budget is filled again from it."),
            (Role::User, "Right."),
        ]),
        ["Reeds & Drones is #template 55 a month, and December's budget is filled again from it."]
    );
}
