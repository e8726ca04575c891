use super::*;

fn user(id: &str, text: &str) -> TranscriptMessage {
    TranscriptMessage { id: id.into(), role: Role::User, text: text.into() }
}

fn rules(text: &str) -> Vec<String> {
    directives(&[user("msg_1", text)]).into_iter().map(|d| d.content).collect()
}

#[test]
fn a_rule_said_in_so_many_words_is_kept_in_the_developers_words() {
    let said = [
        (
            "Thanks. From now on, migrations are reviewed by two people.",
            "From now on, migrations are reviewed by two people.",
        ),
        ("Rule: every handler returns a typed error.", "Rule: every handler returns a typed error."),
        ("ok. And please always use uv, never pip, in this repo.", "Please always use uv, never pip, in this repo."),
        ("Good. Fixtures never go in the src tree.", "Fixtures never go in the src tree."),
        ("I prefer small commits over squashed ones.", "I prefer small commits over squashed ones."),
        ("We use Zod for every request body.", "We use Zod for every request body."),
        ("Turn on clippy pedantic, I want it everywhere.", "Turn on clippy pedantic, I want it everywhere."),
        ("A partir de ahora los tests usan el puerto 0.", "A partir de ahora los tests usan el puerto 0."),
        // Words that put off a plan can sit inside a rule, about something else.
        (
            "Always add a timeout to the pool, it fills up eventually.",
            "Always add a timeout to the pool, it fills up eventually.",
        ),
        ("Never merge a PR that is not yet reviewed.", "Never merge a PR that is not yet reviewed."),
        ("We never keep debug logs longer than one day.", "We never keep debug logs longer than one day."),
        // An obligation over everything, or over every one of a kind, and a rule said to be final.
        (
            "Everything in this service has to build with the stable toolchain, nobody runs nightly.",
            "Everything in this service has to build with the stable toolchain, nobody runs nightly.",
        ),
        ("Every migration has to be reversible.", "Every migration has to be reversible."),
        ("OK. The API speaks JSON only, full stop.", "The API speaks JSON only, full stop."),
        ("Coverage stays above 80 %, no exceptions.", "Coverage stays above 80 %, no exceptions."),
        ("We release on Tuesdays. Full stop.", "We release on Tuesdays. Full stop."),
        // A rule said to stay, to be a convention, to hold in general, or to bound what is allowed.
        (
            "Ah ok. The only labels on gate logs are job, gate and port, and that's how it stays.",
            "The only labels on gate logs are job, gate and port, and that's how it stays.",
        ),
        (
            "Put SET lock_timeout at the top of each deploy script, and make it a convention.",
            "Put SET lock_timeout at the top of each deploy script, and make it a convention.",
        ),
        (
            "No, please don't add crates without asking first, that's a general thing.",
            "No, please don't add crates without asking first, that's a general thing.",
        ),
        (
            "Take it out: activeTab plus our domain is all this extension is ever allowed to ask for.",
            "Take it out: activeTab plus our domain is all this extension is ever allowed to ask for.",
        ),
        // `ever` closing a clause, and a sentence that opens with `Never`, read with the one
        // before it when it is short.
        (
            "Another thing. The export writes the geojson and nobody edits it by hand, ever.",
            "The export writes the geojson and nobody edits it by hand, ever.",
        ),
        (
            "Good. Everything goes by SMS, to both me and Ewan. Never email.",
            "Everything goes by SMS, to both me and Ewan. Never email.",
        ),
        (
            "Never reindex in place, build a new index and swap the alias.",
            "Never reindex in place, build a new index and swap the alias.",
        ),
    ];
    for (text, rule) in said {
        assert_eq!(rules(text), [rule], "{text:?}");
    }
}

/// The real OpenCode sends `opencode run`'s message in double quotes: the quote that closes the
/// message is not part of the rule of its last sentence, nor the opening one of its first.
#[test]
fn a_quoted_message_leaves_no_quote_on_its_rules() {
    let quoted = "\"Please explain the layout. From now on every build runs from the release branch.\"";
    assert_eq!(rules(quoted), ["From now on every build runs from the release branch."]);
    let opening = "\"From now on every build runs from the release branch. Why is CI red?\"";
    assert_eq!(rules(opening), ["From now on every build runs from the release branch."]);
    // Quotes that pair stay: they quote something within the rule.
    let inner = "From now on \"done\" means merged and deployed, always.";
    assert_eq!(rules(inner), [inner]);
}

#[test]
fn a_short_sentence_is_read_with_the_one_it_is_about() {
    assert_eq!(
        rules("Every job that charges a card must be idempotent like this. Make that a rule."),
        ["Every job that charges a card must be idempotent like this. Make that a rule."]
    );
    assert_eq!(
        rules("Then delete the generated folder and ignore it in git. We use codegen from now on."),
        ["Then delete the generated folder and ignore it in git. We use codegen from now on."]
    );
    assert_eq!(
        rules("For new endpoints I want us to use the query builder, not raw SQL. And no ORM ever."),
        ["For new endpoints I want us to use the query builder, not raw SQL. And no ORM ever."]
    );
}

/// "Now a rule." says only that the rule comes next: it is read with the sentence after it, not
/// the one before, and alone it is no rule (holdout19's s243 and s246 saved it as one).
#[test]
fn a_sentence_that_announces_a_rule_is_read_with_the_rule_after_it() {
    assert_eq!(
        rules("Now a rule. No node gets rebooted, updated or migrated during opening hours, ever."),
        ["Now a rule. No node gets rebooted, updated or migrated during opening hours, ever."]
    );
    assert_eq!(
        rules(
            "The backups look fine. Another thing, and this one's a rule. Every camera that can see a unit \
             door gets a privacy mask over the doorway."
        ),
        [
            "Another thing, and this one's a rule. Every camera that can see a unit door gets a privacy mask over the doorway."
        ]
    );
    assert_eq!(
        rules("Thanks, that fixed it. Next thing, and it’s a rule. Pump alarms go out by SMS, never by email."),
        ["Next thing, and it’s a rule. Pump alarms go out by SMS, never by email."]
    );
    // The rule may come after a sentence of context, and the announcement may say more than
    // "a rule"; what the message turns to next is no part of it.
    assert_eq!(
        rules(
            "Done, thanks. Now a rule, and it's about the children. Some of the choir are under 16. \
             A singer under 16 never gets a surname on the poster. Also, the font is too small."
        ),
        ["Now a rule, and it's about the children. Some of the choir are under 16. A singer under 16 never gets a \
             surname on the poster."]
    );
    assert_eq!(
        rules("And a rule for the archive. Nothing in it is edited after it's published; a correction is a new entry."),
        ["A rule for the archive. Nothing in it is edited after it's published; a correction is a new entry."]
    );
    assert_eq!(
        rules("And one more rule, please. Text and the logo only on this screen."),
        ["One more rule, please. Text and the logo only on this screen."]
    );
    // A rule said in the sentence that names it is no announcement.
    assert_eq!(
        rules("The rule is that we never deploy on a Friday."),
        ["The rule is that we never deploy on a Friday."]
    );
    // Alone, or last, it states nothing; before, the short one was read with the sentence before it.
    assert!(rules("Now a rule.").is_empty());
    assert!(rules("Thanks, the deploy worked. Now a rule.").is_empty());
    assert!(rules("Another thing, and this one's a rule.").is_empty());
    assert!(rules("Now, a rule for this project, whoever works on it.").is_empty());
    assert!(rules("Now a rule, and I feel strongly about this one.").is_empty());
    for announcement in [
        "Now a safeguarding rule, and it's non-negotiable.",
        "Now a rule, this one matters.",
        "Now a rule, please write it down somewhere the agency will see it.",
        "Now something I want written down as a rule.",
        "Now, and this is a rule from Fennick's, please treat it as one.",
        "Here's a rule of ours that the importer needs to know about, because new staff get it wrong.",
        "Now, a rule I need the computer to follow, because it's the one that costs us money.",
        "Now, something the board is absolutely firm on.",
        "Now the thing that went wrong last month, I want it written down.",
    ] {
        assert!(rules(announcement).is_empty(), "{announcement:?}");
        let said = format!("{announcement} No exhibitor's phone number ever appears on a public page.");
        assert_eq!(rules(&said), std::slice::from_ref(&said), "read with the rule after it");
    }
    // "Make that a rule" names what came before: still read with it.
    assert_eq!(
        rules("Every job that charges a card must be idempotent. Make that a rule."),
        ["Every job that charges a card must be idempotent. Make that a rule."]
    );
}

/// A house convention needs none of the words above: it is said with a lead-in and a colon, as
/// a ban, as where a kind of thing lives, or as a choice kept.
#[test]
fn a_house_convention_is_kept_however_it_is_said() {
    let said = [
        (
            "OK, lesson for this repo then: the top level of a module only defines functions and constants.",
            "Lesson for this repo then: the top level of a module only defines functions and constants.",
        ),
        (
            "Policy for the plugin: we support Neovim 0.10 and newer only.",
            "Policy for the plugin: we support Neovim 0.10 and newer only.",
        ),
        (
            "Rule for the invoice page, and Dilys will check it herself: an invoice goes out only after approval.",
            "Rule for the invoice page, and Dilys will check it herself: an invoice goes out only after approval.",
        ),
        (
            "Two pointer bugs this year, so let's settle it: state that outlives a frame refers to tiles by index.",
            "Two pointer bugs this year, so let's settle it: state that outlives a frame refers to tiles by index.",
        ),
        ("Our convention is signals go up, calls go down.", "Our convention is signals go up, calls go down."),
        ("But please no extension methods on kernel classes.", "Please no extension methods on kernel classes."),
        (
            "No %raw in components, ever: interop goes through bindings.",
            "No %raw in components, ever: interop goes through bindings.",
        ),
        (
            "And while you're in Private/: no aliases in module code, full cmdlet names.",
            "While you're in Private/: no aliases in module code, full cmdlet names.",
        ),
        (
            "Shaders go in their own .glsl files, imported with vite-plugin-glsl.",
            "Shaders go in their own .glsl files, imported with vite-plugin-glsl.",
        ),
        (
            "While you're in the unit, please no Application.ProcessMessages anywhere in tollbar.",
            "While you're in the unit, please no Application.ProcessMessages anywhere in tollbar.",
        ),
        (
            "I want it clean, and no lint_off pragmas anywhere except vendor/.",
            "I want it clean, and no lint_off pragmas anywhere except vendor/.",
        ),
        ("OK, so: per-request data lives in ngx.ctx.", "Per-request data lives in ngx.ctx."),
        (
            "Every ADaM dataset goes out through %write_adam, which checks the variables.",
            "Every ADaM dataset goes out through %write_adam, which checks the variables.",
        ),
        (
            "That goes for all of ZBRK: nobody writes a FOR ALL ENTRIES without a check.",
            "That goes for all of ZBRK: nobody writes a FOR ALL ENTRIES without a check.",
        ),
        (
            "So this doesn't happen again: turn on eslint-plugin-solid with solid/reactivity as an error.",
            "This doesn't happen again: turn on eslint-plugin-solid with solid/reactivity as an error.",
        ),
        (
            "For new code here we use embedded SQL for reading, no new CHAIN loops.",
            "For new code here we use embedded SQL for reading, no new CHAIN loops.",
        ),
        (
            "While you're in that store: for new state I want signals, not BehaviorSubjects.",
            "While you're in that store: for new state I want signals, not BehaviorSubjects.",
        ),
        (
            "In this app I'd really rather keep logic out of QML: bindings are fine.",
            "In this app I'd really rather keep logic out of QML: bindings are fine.",
        ),
        (
            "No. RANS with kOmegaSST is what we use, this is for the governors, not for a journal.",
            "RANS with kOmegaSST is what we use, this is for the governors, not for a journal.",
        ),
        (
            "Changes are made on mirth-test and prod is deployed from git. That's how we work.",
            "Changes are made on mirth-test and prod is deployed from git. That's how we work.",
        ),
        ("We stay on uncurried mode, it's the v11 default.", "We stay on uncurried mode, it's the v11 default."),
        (
            "So for fogbank: every function block instance is called on every scan.",
            "For fogbank: every function block instance is called on every scan.",
        ),
    ];
    for (text, rule) in said {
        assert_eq!(rules(text), [rule], "{text:?}");
    }
}

#[test]
fn descriptions_questions_and_requests_are_not_rules() {
    let not_rules = [
        "The build always fails on the ARM runner.",
        "The export job never finishes when the queue is full.",
        "Every branch switch rebuilds everything and it takes 14 minutes.",
        "Should we always use the cache for this?",
        "Is the extension ever allowed to read the page?",
        "I restarted it twice and that's how it stayed.",
        "Is there a lint rule for floating promises?",
        "Run the tests.",
        "Let's do both.",
        "Migrate everything and remove the old runner.",
        "Fix them properly, no casts.",
        "The CI runners should use the cache too.",
        // A chore or a time, not a rule; `everything` as an object, not as what must hold.
        "I have to restart the watcher every time I switch branches.",
        "Every time I run it, it has to rebuild the whole crate.",
        "Since the upgrade the linter must be crashing every time it starts.",
        "`git log -p` should give you everything.",
        "Let's upgrade to 2.0 and reformat everything in one commit then.",
        "Everything looks fine now.",
        "The importer chokes on a full stop in the file name.",
        // `Never` that bans nothing, and `ever` inside a clause.
        "Never mind, the second run went through.",
        "Never again am I deploying on a Friday afternoon like that.",
        "It never reindexed in place, the alias was swapped.",
        "Has anyone ever edited the geojson by hand?",
        // Near misses of a house convention: a time after a lead-in word, a report of nothing
        // found, one thing's place (a task), a bug or a time after a colon.
        "Dave says the first lesson only starts at 08:45, so spread it over 15 minutes.",
        "Hmm: no errors in the log, and the network tab shows a 200.",
        "No luck on the staging box either, same timeout.",
        "Rebuilt it, and no errors in the log this time.",
        "Checked the dashboards, and no Grafana.Alerts on the new host.",
        "The fix goes in parser.rs, next to the tokenizer.",
        "It goes through the proxy first and then times out.",
        "I noticed requests go through the old proxy on staging.",
        "Remember that payments go through the checkout service.",
        "Weird: every request returns a 500 after the deploy.",
        "The upload goes out through the proxy and times out there.",
        "I hope this doesn't happen again, it cost us a day.",
        "Let's add a welcome banner for new users.",
        "I'd rather you fix the flaky test first.",
        "Which version is what we use on the build box?",
        "Now a house thing, since you're in the file: it's written in the old syntax.",
        "Next: every morning at 8:00 the lab PCs boot and the cache falls over.",
        // Put off or dropped: what is not done now.
        "I'd also like molecule tests for every role at some point, but not this sprint.",
        "We should use Bazel for every target, maybe later.",
        "From now on every service gets a dashboard. Actually no, forget it.",
        "Let's pin every base image, but not yet.",
    ];
    for text in not_rules {
        assert!(rules(text).is_empty(), "{text:?} is not a rule: {:?}", rules(text));
    }
}

#[test]
fn only_the_users_prose_is_read() {
    let code = "Look at this:\n```\n// from now on we always use unsafe here\nfn main() {}\n```\nWhat does it do?";
    assert!(rules(code).is_empty(), "a rule inside a pasted code block is the code's, not the developer's");
    let assistant = TranscriptMessage {
        id: "msg_2".into(),
        role: Role::Assistant,
        text: "From now on I will always use port 0 in tests.".into(),
    };
    assert!(directives(&[assistant]).is_empty(), "the agent's promises are not the developer's rules");
    let long = format!("From now on {}.", "the logs are kept ".repeat(40));
    assert!(rules(&long).is_empty(), "a passage is not a rule");
}

#[test]
fn a_rule_is_a_preference_from_its_message_with_a_title_of_its_first_sentence() {
    let said = directives(&[
        user("msg_1", "Why is CI red?"),
        user(
            "msg_7",
            "Good. Test names always start with the unit they test, from now on, across every crate of the workspace we have here. Make it so.",
        ),
    ]);
    assert_eq!(said.len(), 1);
    let rule = &said[0];
    assert_eq!(
        (rule.origin, rule.kind.as_str(), rule.message_ids.as_slice()),
        (Origin::Directive, "preference", &["msg_7".to_owned()][..])
    );
    assert!(rule.title.len() <= MAX_TITLE_BYTES && rule.title.ends_with('…'), "{}", rule.title);
    assert!(rule.title.starts_with("Test names always start with the unit they test"), "{}", rule.title);
    assert!(rule.content.ends_with("Make it so."), "{}", rule.content);
}

/// A guess, a reaction or a complaint said with "must", "never" or "every" is no rule.
#[test]
fn a_guess_a_reaction_or_a_complaint_is_no_rule() {
    for said in [
        "Never would have guessed.",
        "Everything's about four times what it should be.",
        "The volunteers must be drawing the boxes carelessly on those, it's always the same two or three people.",
        "The trouble: every time someone sits down, the sound cuts out for a second.",
        "Our editors are going mad: every time we deploy, the banner goes back to closed.",
        "Last night the loans app fell over: every request failed with a password error.",
    ] {
        assert!(rules(said).is_empty(), "{said:?}");
    }
    // The same words in a rule still make one.
    for said in [
        "Never deploy on a Friday.",
        "The volunteers must draw every box around the whole stone.",
        "Rule for the API: every request carries the station's key.",
    ] {
        assert_eq!(rules(said), [said], "{said:?}");
    }
}

/// A rule's lead-in ("A rule, before I forget: …") is read with what the message says after it,
/// as an announcement is: the first sentence after the colon is not always the whole rule.
#[test]
fn a_rule_after_its_lead_in_is_read_with_the_rest_of_the_message() {
    assert_eq!(
        rules(
            "And a rule, before I forget, for anyone who helps on this: we only ever listen on that network. \
             Nothing gets sent to a lane controller from the laptop. Also, the capture disk is nearly full."
        ),
        ["A rule, before I forget, for anyone who helps on this: we only ever listen on that network. Nothing \
             gets sent to a lane controller from the laptop."]
    );
    assert_eq!(
        rules("One thing we promised every patient: the video never leaves their computer. We only get the numbers."),
        ["One thing we promised every patient: the video never leaves their computer. We only get the numbers."]
    );
    for said in ["Gridsmith never talks to the internet, not for updates.", "Zabbix never sends commands to a pump."] {
        assert_eq!(rules(said), [said], "{said:?}");
    }
}

#[test]
fn a_ban_on_everyone_is_a_rule_and_a_report_of_nobody_is_not() {
    for said in [
        "Nobody edits the generated files by hand.",
        "Nobody gets into the console with just a password. Not me, not the locums.",
        "Nobody does kubectl apply on this cluster.",
        "We don't delete members. Ever.",
    ] {
        assert_eq!(rules(said), [said], "{said:?}");
    }
    for said in [
        "Nobody touched the lidar.",
        "Nobody needs 900 fps of a hillside.",
        "Nobody edits readings after the morning check anyway, so it's fine.",
        "Nobody uses it and it doubles CI time.",
        "Nobody has deleted anything since October.",
        "Ever since the move it restarts at night.",
    ] {
        assert!(rules(said).is_empty(), "{said:?}");
    }
}

#[test]
fn what_the_developer_says_matters_is_read_with_what_follows() {
    assert_eq!(
        rules(
            "Good. And something I want to be really clear about. Customers' addresses stay on Dad's phone. \
             No cloud sync, no analytics. Next: the overdue thing, what counts as overdue?"
        ),
        [
            "Something I want to be really clear about. Customers' addresses stay on Dad's phone. No cloud sync, no analytics."
        ]
    );
    for (said, kept) in [
        (
            "This one's really important to me. I never give the exact location of a spot in a post.",
            "This one's really important to me. I never give the exact location of a spot in a post.",
        ),
        (
            "Something I feel strongly about: the shop is useless with a screen reader. No photo goes up without a description.",
            "Something I feel strongly about: the shop is useless with a screen reader. No photo goes up without a description.",
        ),
        (
            "Now something the committee agreed after the row in September: no demo goes public until the demonstrator says yes.",
            "Now something the committee agreed after the row in September: no demo goes public until the demonstrator says yes.",
        ),
        (
            "Something I should have said at the start. These are retired people, home all day.",
            "Something I should have said at the start. These are retired people, home all day.",
        ),
    ] {
        assert_eq!(rules(said), [kept], "{said:?}");
    }
    // Alone, or as what a bug did, it is no rule.
    for said in ["Now something important.", "Something that matters more than anything else in here."] {
        assert!(rules(said).is_empty(), "{said:?}");
    }
}

#[test]
fn nothing_ever_done_to_a_kind_of_thing_is_a_ban() {
    assert_eq!(
        rules("Nothing in an edition is ever read by a computer voice."),
        ["Nothing in an edition is ever read by a computer voice."]
    );
    assert_eq!(
        rules("About Junk. Nothing here gets deleted by a machine, Junk included."),
        ["Nothing here gets deleted by a machine, Junk included."]
    );
    for said in ["Nothing happened after the restart.", "Nothing is broken, the build is green."] {
        assert!(rules(said).is_empty(), "{said:?}");
    }
}

#[test]
fn more_ways_of_announcing_a_rule_are_read_with_what_follows() {
    for (message, rule) in [
        (
            "Good. And the rule, since we're in here. Once a match is closed, the quizmaster can't change a \
             score. We had a quizmaster fiddling his own pub's scores.",
            "The rule, since we're in here. Once a match is closed, the quizmaster can't change a score. We had a \
             quizmaster fiddling his own pub's scores.",
        ),
        (
            "Now something I'm strict about, because the last person ran a plugin over everything. The music \
             files themselves are never changed.",
            "Now something I'm strict about, because the last person ran a plugin over everything. The music \
             files themselves are never changed.",
        ),
        (
            "Good. Now, a thing I want written down for whoever helps after me. Nothing on this box runs as root.",
            "Now, a thing I want written down for whoever helps after me. Nothing on this box runs as root.",
        ),
        (
            "Now, the partners and I agreed this when we started and I want it in the code, not just in my head. \
             No postcode and no first language in the features.",
            "Now, the partners and I agreed this when we started and I want it in the code, not just in my head. \
             No postcode and no first language in the features.",
        ),
    ] {
        assert_eq!(rules(message), [rule], "{message:?}");
    }
    // Alone they state nothing.
    for announcement in [
        "And the rule, since we're in here.",
        "Now something I'm strict about, because of last year.",
        "Now, a thing I want written down for whoever helps after me.",
        "The partners and I agreed this and I want it in the code, not just in my head.",
    ] {
        assert!(rules(announcement).is_empty(), "{announcement:?}");
    }
}

#[test]
fn a_plan_put_off_till_later_is_no_rule_nor_fact() {
    for put_off in [
        "Dad wants online booking with card payments, but not till after the summer season.",
        "The trustees asked about solar panels on the roofs, but that's a separate study and not now.",
        "Dr Hale wants the same for the flu clinics. Not this winter, park it.",
    ] {
        assert!(puts_off(put_off), "{put_off:?}");
    }
    assert!(!puts_off("Never merge a PR that is not yet reviewed."));
}

#[test]
fn a_rule_announced_as_set_in_stone_is_read_with_what_follows() {
    assert_eq!(
        rules(
            "Now, something I want set in stone. No client's name or address ever goes into a prompt. Even \
             locally."
        ),
        ["Now, something I want set in stone. No client's name or address ever goes into a prompt. Even locally."]
    );
    assert!(rules("Now, something I want set in stone.").is_empty());
}
