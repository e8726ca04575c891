use super::*;

fn messages() -> Vec<TranscriptMessage> {
    // One conversation that names everything the answers below cite: a fact is kept only when
    // it is grounded in what was said.
    vec![
        TranscriptMessage {
            id: "msg_a".into(),
            role: Role::User,
            text: "Why does the build fail? And Sidekiq retried a job twice; our retry limit is 3.".into(),
        },
        TranscriptMessage {
            id: "msg_b".into(),
            role: Role::Assistant,
            text: "Cargo.lock pins serde 1.0.100; cargo update -p serde fixes it. Run the tests with \
                   cargo nextest run. Releases are tagged vX.Y.Z; in format strings write vec![1, 2] and {}."
                .into(),
        },
    ]
}

#[test]
fn an_answer_whose_every_fact_copies_the_transcript_is_unusable_not_empty() {
    let copied = r#"{"facts": [{"type": "bugfix", "content": "Cargo.lock pins serde 1.0.100; rerun: (ran bash: {\"command\":\"cargo update -p serde\"})"}]}"#;
    assert!(matches!(parse_facts(copied, &messages()), Err(LlmError::Malformed(_))), "asked again, sampled");
    assert_eq!(parse_facts(r#"{"facts": []}"#, &messages()).unwrap().len(), 0, "nothing found is an answer");
    let said_in_passing = r#"{"facts": [{"type": "config", "content": "Tests run with `cargo nextest run` (ran with --no-fail-fast: in CI)."}]}"#;
    assert_eq!(parse_facts(said_in_passing, &messages()).unwrap().len(), 1, "no tool note: one word, then a colon");
}

#[test]
fn facts_come_out_of_a_fenced_answer_with_prose_and_trailing_commas() {
    let answer = "Sure! Here are the facts:\n```json\n{\"facts\": [\n  {\"type\": \"bugfix\", \"title\": \"Build fails on old serde\", \
                  \"content\": \"The build failed because Cargo.lock pinned serde 1.0.100; `cargo update -p serde` fixed it.\", \
                  \"message_ids\": [\"m1\", \"m2\",],},\n]}\n```\nHope this helps.";
    let facts = parse_facts(answer, &messages()).unwrap();
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].kind, "bugfix");
    assert_eq!(facts[0].title, "Build fails on old serde");
    assert_eq!(facts[0].message_ids, ["msg_a", "msg_b"], "labels resolve to the real ids");
}

#[test]
fn a_bare_array_and_reasoning_before_it_are_accepted() {
    let answer =
        "<think>the user wants {facts}</think>[{\"content\": \"The project uses tabs.\", \"type\": \"style\"}]";
    let facts = parse_facts(answer, &messages()).unwrap();
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].kind, "preference", "a synonym maps to a known type");
    assert_eq!(facts[0].title, "The project uses tabs", "a missing title comes from the content");
    assert!(facts[0].message_ids.is_empty());
}

#[test]
fn unknown_types_map_to_the_default_and_unknown_message_ids_are_left_out() {
    let answer = r#"{"facts": [{"type": "trivia", "content": "Releases are tagged vX.Y.Z.", "message_ids": ["m9", "msg_b", 2]}]}"#;
    let facts = parse_facts(answer, &messages()).unwrap();
    assert_eq!(facts[0].kind, DEFAULT_FACT_TYPE);
    assert_eq!(facts[0].message_ids, ["msg_b"], "m9 does not exist; msg_b and 2 are the same message");
}

#[test]
fn empty_facts_and_transcript_noise_are_dropped() {
    let dump = format!("```\n{}```", "line\n".repeat(20));
    let answer = serde_json::json!({"facts": [
        {"type": "decision", "content": "   "},
        {"type": "decision"},
        {"type": "discovery", "content": "[user]: why does it fail\n[assistant]: because"},
        {"type": "discovery", "content": "User: please fix the tests"},
        {"type": "config", "content": dump},
        {"type": "config", "content": "$ cargo test\n$ cargo build\n$ cargo run\nok"},
        {"type": "config", "content": "x".repeat(MAX_FACT_BYTES + 1)},
        {"type": "pattern", "content": "Add `"},
        {"type": "pattern", "content": "Tests pass."},
        {"type": "config", "content": "Set the retry limit with `retry:"},
        {"type": "config", "content": "Tests run with `cargo nextest run`."},
        {"type": "config", "content": "Tests   run with `cargo nextest run`."},
        {"type": "bugfix", "content": "Cargo.lock pins serde 1.0.100. Fixed: (ran edit: {\"filePath\":\"Cargo.lock\"})"},
    ]})
    .to_string();
    let facts = parse_facts(&answer, &messages()).unwrap();
    let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(
        contents,
        ["Tests run with `cargo nextest run`."],
        "one real fact, its repeat and the fragments dropped"
    );
}

#[test]
fn an_empty_list_is_a_valid_answer() {
    assert!(parse_facts(r#"{"facts": []}"#, &messages()).unwrap().is_empty());
}

#[test]
fn answers_without_usable_json_are_malformed() {
    for answer in [
        "I'm sorry, I cannot help with that.",
        "{\"facts\": [ {\"content\": \"unterminated",
        "{\"facts\": \"none\"}",
        "{\"answer\": 42}",
        "\"just a string\"",
    ] {
        let err = parse_facts(answer, &messages()).unwrap_err();
        assert!(matches!(err, LlmError::Malformed(_)), "{answer}: {err}");
        assert!(err.retryable(), "a malformed answer is retried later");
    }
}

#[test]
fn an_answer_cut_off_at_max_tokens_keeps_its_whole_facts() {
    // An answer that stops inside its third fact (at `max_tokens`, or where decoding found no
    // valid next token).
    let answer = "```json\n{\"facts\": [{\"type\": \"bugfix\", \"title\": \"Sidekiq retries twice\", \
                  \"content\": \"Sidekiq retried the job twice when the network failed.\", \"message_ids\": [\"m1\"]}, \
                  {\"type\": \"config\", \"title\": \"Retry limit\", \"content\": \"The retry limit is 3 {per queue}\"}, \
                  {\"type\": \"decision\", \"title\": \"Use exponential back";
    let facts = parse_facts(answer, &messages()).unwrap();
    let titles: Vec<&str> = facts.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(titles, ["Sidekiq retries twice", "Retry limit"], "the fact being written is left out");
    assert_eq!(facts[1].content, "The retry limit is 3 {per queue}");
    // Cut inside the first fact's content, or after its type or title: nothing whole to keep,
    // and the answer is asked again.
    for cut in [
        "{\"facts\": [{\"type\": \"bugfix\", \"content\": \"Sidekiq",
        "{\"facts\": [{\"type\": \"bugfix\"",
        "{\"facts\": [{\"type\": \"bugfix\", \"title\": \"Sidekiq retries twice\", \"content\": \"Sidekiq re",
    ] {
        let err = parse_facts(cut, &messages()).unwrap_err();
        assert!(matches!(err, LlmError::Malformed(_)), "{cut}: {err}");
    }
}

#[test]
fn a_fact_whose_content_closed_is_kept_when_its_ids_are_cut_short() {
    // The decoder ends an answer it finds repeating itself; a list of ids said again can end
    // it in the middle of the next fact's ids, after its content was written whole.
    let whole = r#"{"type": "bugfix", "content": "Sidekiq retried the job twice when the network failed.", "message_ids": ["m1", "m2"]}"#;
    let cut_in_ids = r#"{"type": "config", "content": "The retry limit is 3 per queue.", "message_ids": ["m1", "m"#;
    let facts = parse_facts(&format!(r#"{{"facts": [{whole}, {cut_in_ids}"#), &messages()).unwrap();
    let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(contents, ["Sidekiq retried the job twice when the network failed.", "The retry limit is 3 per queue."]);
    assert_eq!(facts[1].message_ids, ["msg_a"], "the ids that closed are kept, the cut one is not");

    // Cut after the content and before its ids, or inside the key that follows it.
    for tail in [r#", "message_ids": ["#, r#", "message_i"#, ", "] {
        let answer = format!(r#"{{"facts": [{{"type": "config", "content": "The retry limit is 3 per queue."{tail}"#);
        let facts = parse_facts(&answer, &messages()).unwrap();
        assert_eq!(facts.len(), 1, "{answer}");
        assert!(facts[0].message_ids.is_empty(), "{answer}");
    }
}

#[test]
fn a_template_filled_with_name_after_name_keeps_its_first_fill() {
    // Each fill shares less than `is_variant_of`'s 70 % of words with the others.
    let fills = ["Cargo.lock file to pin serde", "Sidekiq retry limit", "cargo nextest run command", "vX.Y.Z tags"]
        .map(|name| format!(r#"{{"type": "config", "content": "The project uses the {name}."}}"#));
    let answer =
        format!(r#"{{"facts": [{}, {{"type": "config", "content": "The retry limit is 3."}}]}}"#, fills.join(", "));
    let facts = parse_facts(&answer, &messages()).unwrap();
    let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(contents, ["The project uses the Cargo.lock file to pin serde.", "The retry limit is 3."]);
    // A name in backticks is one word, wherever it stands in the mould.
    let named = ["`cargo update -p serde`", "`cargo nextest run`", "`Cargo.lock`"]
        .map(|name| format!(r#"{{"type": "config", "content": "The {name} command is used to build it."}}"#));
    let answer = format!(r#"{{"facts": [{}]}}"#, named.join(", "));
    let facts = parse_facts(&answer, &messages()).unwrap();
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert_eq!(facts[0].content, "The `cargo update -p serde` command is used to build it.");
    // Two facts that open alike are two facts.
    let two = r#"{"facts": [{"type": "config", "content": "The retry limit is 3 for Sidekiq."}, {"type": "config", "content": "The retry limit is set in the serde config."}]}"#;
    assert_eq!(parse_facts(two, &messages()).unwrap().len(), 2);
    // Two facts that open alike and one of them said again, as a model that loops repeats its
    // last fact: still two facts, not a template of three.
    let repeated = r#"{"type": "decision", "content": "The team decided to keep Sidekiq retrying twice."}"#;
    let answer = format!(
        r#"{{"facts": [{{"type": "decision", "content": "The team decided to pin serde in Cargo.lock."}}, {repeated}, {repeated}]}}"#
    );
    let contents: Vec<String> = parse_facts(&answer, &messages()).unwrap().into_iter().map(|f| f.content).collect();
    assert_eq!(
        contents,
        ["The team decided to pin serde in Cargo.lock.", "The team decided to keep Sidekiq retrying twice."]
    );
}

#[test]
fn brackets_inside_strings_do_not_end_the_json() {
    let answer = r#"Answer: {"facts": [{"content": "Use `vec![1, 2]` and `{}` in format strings.", "type": "pattern"}]} trailing } ]"#;
    let facts = parse_facts(answer, &messages()).unwrap();
    assert_eq!(facts[0].content, "Use `vec![1, 2]` and `{}` in format strings.");
}

#[test]
fn summaries_and_briefs_read_json_or_plain_text() {
    let summary =
        parse_summary("```json\n{\"title\": \"Fixing the  build\", \"summary\": \"Pinned serde.\",}\n```").unwrap();
    assert_eq!(summary, Written { title: Some("Fixing the build".into()), content: "Pinned serde.".into() });
    let plain = parse_brief("cairn is a memory server for coding agents, written in Rust.").unwrap();
    assert_eq!(plain.content, "cairn is a memory server for coding agents, written in Rust.");
    assert_eq!(plain.title, None);
    let listed = parse_brief(r#"{"title": "cairn", "content": ["Rust workspace", "SQLite store"]}"#).unwrap();
    assert_eq!(listed.content, "- Rust workspace\n- SQLite store");
    assert!(matches!(parse_summary("{\"summary\": \"\"}"), Err(LlmError::Malformed(_))));
    assert!(matches!(parse_summary("   "), Err(LlmError::Malformed(_))));
    assert!(matches!(parse_summary("[user]: hi\n[assistant]: hello"), Err(LlmError::Malformed(_))));
}

#[test]
fn the_requests_label_messages_and_ask_for_json_at_temperature_zero() {
    let request = facts_request(&messages());
    assert!(request.json && request.temperature == 0.0);
    assert_eq!(request.messages[0].role, Role::System);
    let user = &request.messages[1].content;
    assert!(user.contains("[m1] user: Why does the build fail?"), "{user}");
    assert!(user.contains("[m2] assistant: Cargo.lock pins"), "{user}");
    assert_eq!(request.messages.len(), 3);
    assert_eq!(request.prefill(), Some(FACTS_PREFILL), "the answer starts as the list of facts");
    assert_eq!(request.without_prefill().len(), 2);
    let continued = format!("{FACTS_PREFILL}{}", r#"{"type": "bugfix", "content": "The lockfile was stale."}]}"#);
    assert_eq!(parse_facts(&continued, &messages()).unwrap().len(), 1, "a continued answer parses whole");
    let summary = summary_request(Some("Earlier: set up CI."), &messages());
    assert!(summary.messages[1].content.starts_with("Previous summary:\nEarlier: set up CI."));
    let brief = brief_request(&[("README.md".into(), "# cairn\nMemory.".into())]);
    assert!(brief.messages[1].content.contains("=== README.md ===\n# cairn"));
}

#[test]
fn a_keep_question_names_its_fact_on_one_line_after_the_same_transcript() {
    let plain = facts_request(&messages());
    let asked = keep_request(&messages(), "The port is\n8080 now.");
    let user = &asked.messages[1].content;
    assert!(user.starts_with(plain.messages[1].content.as_str()), "the transcript's cache is shared");
    assert!(user.contains("\"The port is 8080 now.\""), "{user}");
    assert!(user.ends_with("Answer with one word: yes or no."), "{user}");
    assert_eq!((asked.prefill(), asked.max_tokens), (None, 1), "one token, the verdict");
    let other = keep_request_asking(&messages(), "x", "Keep {fact}?");
    assert!(other.messages[1].content.ends_with("Keep x?"));
}

#[test]
fn a_follow_up_asks_its_question_after_the_same_transcript() {
    let plain = facts_request(&messages());
    for follow_up in FollowUp::ALL {
        let asked = follow_up_request(&messages(), follow_up);
        let user = &asked.messages[1].content;
        assert!(user.starts_with(plain.messages[1].content.as_str()), "the prompt up to the question is shared");
        assert!(user.ends_with(follow_up.question()), "{user}");
        assert_eq!(asked.messages[0], plain.messages[0], "the same instructions");
        assert_eq!(asked.prefill(), Some(FACTS_PREFILL), "answered as a list of facts");
        assert_eq!(FollowUp::from_name(follow_up.name()), Some(follow_up));
    }
    assert_eq!(FollowUp::from_name("everything"), None);
}

#[test]
fn a_long_message_is_cut_before_it_is_sent() {
    let long = vec![TranscriptMessage { id: "m".into(), role: Role::User, text: "é".repeat(MAX_MESSAGE_BYTES) }];
    let sent = &facts_request(&long).messages[1].content;
    assert!(sent.len() < MAX_MESSAGE_BYTES + 64 && sent.contains("[…]"));
}

#[test]
fn windows_cover_every_message_once_within_the_budget() {
    let many: Vec<TranscriptMessage> =
        (0..10).map(|i| TranscriptMessage { id: format!("{i}"), role: Role::User, text: "w".repeat(300) }).collect();
    let windows = windows(&many, 1000);
    assert_eq!(windows, [0..3, 3..6, 6..9, 9..10]);
    let oversized = super::windows(&many[..1], 10);
    assert_eq!((oversized.len(), oversized[0].clone()), (1, 0..1), "an oversized message is a window of its own");
    assert!(super::windows(&[], 1000).is_empty());
}

#[test]
fn a_window_ends_before_a_question_so_its_answers_stay_with_it() {
    // user, assistant, assistant, user, assistant, ...: 300 bytes of text each (332 counted).
    let roles =
        [Role::User, Role::Assistant, Role::Assistant, Role::User, Role::Assistant, Role::User, Role::Assistant];
    let chat: Vec<TranscriptMessage> = roles
        .iter()
        .enumerate()
        .map(|(i, role)| TranscriptMessage { id: format!("{i}"), role: *role, text: "w".repeat(300) })
        .collect();
    assert_eq!(windows(&chat, 1400), [0..3, 3..7], "four fit, but the fourth is a question: it opens the next");
    assert_eq!(windows(&chat, 700), [0..2, 2..3, 3..5, 5..7], "no question to end at: the budget decides");
    let every = windows(&chat, 1000);
    assert_eq!(every.iter().map(ExactSizeIterator::len).sum::<usize>(), chat.len());
    assert!(every.iter().all(|w| w.len() * 332 <= 1000), "{every:?}");
}

#[test]
fn a_fact_whose_names_and_numbers_were_never_said_is_dropped() {
    let answer = serde_json::json!({"facts": [
        // Copied from the prompt's example: nothing of it was said.
        {"type": "config", "content": "The staging database runs Postgres 15 on port 5433, set in `deploy/staging.env`."},
        // Half of its anchors were said (`Cargo.lock`, not `serde 2.0`): kept.
        {"type": "config", "content": "Cargo.lock pins serde, which the team wants at 2.0."},
        // No anchors at all: the model's own words, kept.
        {"type": "preference", "content": "The developer wants failing builds explained before they are fixed."},
    ]})
    .to_string();
    let contents: Vec<String> = parse_facts(&answer, &messages()).unwrap().into_iter().map(|f| f.content).collect();
    assert_eq!(
        contents,
        [
            "Cargo.lock pins serde, which the team wants at 2.0.",
            "The developer wants failing builds explained before they are fixed."
        ]
    );
    assert!(grounded("Bump to `serde 1.0.100`, see CARGO.LOCK.", &messages()), "anchors match in any case");
    let mut said = messages();
    said[1].text.push_str(" Staging runs Postgres 15 on port 5433.");
    assert!(
        !grounded("The staging database runs Postgres 15 on port 5433, set in `deploy/staging.env`.", &said),
        "two of three anchors said, but `deploy/staging.env` is the prompt's example's"
    );
    assert!(grounded("Staging runs Postgres 15 on port 5433.", &said));
    assert!(EXAMPLE_ANCHORS.contains("heif-convert") && !EXAMPLE_ANCHORS.contains("m2"), "{:?}", *EXAMPLE_ANCHORS);
    assert!(!grounded("Use e.g. `pnpm` 9.", &messages()), "`e.g` is no anchor; `pnpm` and 9 were never said");
}

#[test]
fn a_title_from_content_ends_at_a_sentence_not_inside_a_name() {
    let answer = r#"[{"content": "`FarmOut.from_orm` became `FarmOut.model_validate` in 2.0. Nothing else changed."}]"#;
    let mut said = messages();
    said[1].text.push_str(" FarmOut.from_orm became FarmOut.model_validate in 2.0.");
    let facts = parse_facts(answer, &said).unwrap();
    assert_eq!(facts[0].title, "`FarmOut.from_orm` became `FarmOut.model_validate` in 2.0");
}

#[test]
fn a_template_filled_again_and_again_is_one_fact_and_two_settings_of_one_kind_are_two() {
    let fact = |content: &str| serde_json::json!({"type": "config", "content": content});
    let answer = serde_json::json!({"facts": [
        fact("`Cargo.lock` declares serde at 1.0.100, pinned by the build."),
        fact("`Cargo.lock` declares serde at 1.0.100, pinned by the tests."),
        fact("`Cargo.lock` declares serde at 1.0.100, pinned by the releases."),
        fact("Sidekiq's retry limit is 3."),
        fact("Tests run with `cargo nextest run`."),
    ]})
    .to_string();
    let facts = parse_facts(&answer, &messages()).unwrap();
    let contents: Vec<&str> = facts.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(
        contents,
        [
            "`Cargo.lock` declares serde at 1.0.100, pinned by the build.",
            "Sidekiq's retry limit is 3.",
            "Tests run with `cargo nextest run`."
        ],
        "the first of the run kept, the others dropped"
    );
    // Two values of one kind share too few words to be one fact.
    assert!(!is_variant_of("The staging database listens on port 5433.", "The test database listens on port 5432."));
    assert!(is_variant_of("The probe is set in `src/health.go`.", "The probe is set in `deploy/app.yaml`."));
}

#[test]
fn a_fact_that_copies_the_question_it_was_asked_is_dropped() {
    let answer = serde_json::json!({"facts": [
        // The settings question, saved as a config fact (seen on holdout9).
        {"type": "config", "content": "The settings: list the commands, versions, ports, paths and configuration values \
            this conversation chose or changed, as one config fact each."},
        {"type": "config", "content": "Sidekiq's retry limit is 3."},
    ]})
    .to_string();
    let contents: Vec<String> = parse_facts(&answer, &messages()).unwrap().into_iter().map(|f| f.content).collect();
    assert_eq!(contents, ["Sidekiq's retry limit is 3."]);
    // Words the conversation said itself are its own, even where the instructions say them too.
    let mut said = messages();
    said[0].text.push_str(" Please list the commands, versions, ports, paths and configuration values we use.");
    let quoted = "The team wants to list the commands, versions, ports, paths and configuration values in the README.";
    assert!(!copies_the_instructions(quoted, &said));
    assert!(copies_the_instructions(quoted, &messages()));
    // The example facts' mould with the conversation's own values is the conversation's fact.
    let mould = "The development database runs Postgres 15 on port 5433, set in `deploy/dev.env`.";
    assert!(!copies_the_instructions(mould, &messages()));
}

#[test]
fn a_setting_is_kept_when_the_conversation_chose_it_not_when_it_only_described_it() {
    let said = |id: &str, role: Role, text: &str| TranscriptMessage { id: id.into(), role, text: text.into() };
    let messages = vec![
        said(
            "m1",
            Role::User,
            "hallkeeper runs PostgreSQL 16 on Debian; the SQL files live in sql/. Exports time out.",
        ),
        said("m2", Role::Assistant, "The input directory is data/in.\n(ran read: {\"filePath\":\"data/in/README\"})"),
        said("m3", Role::User, "Raise the pool to 40, and the webhook secret is cartwheel-preview in preview."),
        said(
            "m4",
            Role::Assistant,
            "Pool raised, heartbeat every 30 seconds, linter strict.\n(ran edit: {\"filePath\":\"src/config.ts\"})",
        ),
    ];
    let setting = |content: &str| Fact {
        kind: "config".into(),
        title: String::new(),
        content: content.into(),
        message_ids: Vec::new(),
    };
    let kept = |content: &str, opening: Option<&str>| FollowUp::Settings.keeps(&setting(content), &messages, opening);
    // The developer chose it, with a value or without one.
    assert!(kept("The export pool size is 40.", Some("m1")));
    assert!(kept("The webhook secret is `cartwheel-preview` in preview.", Some("m1")));
    // The agent set a value in the message that edited a file.
    assert!(kept("The heartbeat runs every 30 seconds, set in `src/config.ts`.", Some("m1")));
    // What the opening described, or the agent only read, was not chosen here.
    assert!(!kept("The PostgreSQL version is 16.", Some("m1")));
    assert!(!kept("The SQL files are in the `sql/` directory.", Some("m1")));
    assert!(!kept("The input directory is `data/in`.", Some("m1")));
    // A setting without a value needs the developer's words, not only an edit beside it.
    assert!(!kept("The linter is strict.", Some("m1")));
    // A later window has no opening: the developer's first words there are a message like any.
    assert!(kept("The PostgreSQL version is 16.", None));
    // Words said everywhere or nowhere tell nothing: kept.
    assert!(kept("It is set.", Some("m1")));
    // What a thing is for is no value chosen, even in the words the developer chose with.
    assert!(kept("The pool is raised to 40.", Some("m1")));
    assert!(!kept("The `pool` command is used to raise the pool to 40.", Some("m1")));
    assert!(!kept("The pool settings are used for raising it to 40.", Some("m1")));
    // The bug question's facts are not read this way.
    assert!(FollowUp::Bug.keeps(&setting("The PostgreSQL version is 16."), &messages, Some("m1")));
}

#[test]
fn a_decision_setting_or_fix_in_the_developers_own_words_is_dropped() {
    let messages = vec![
        TranscriptMessage {
            id: "u1".into(),
            role: Role::User,
            text: "The show times have been an hour off since the clocks changed on Sunday. Raise the cache TTL to 40 \
                   instead of 20 while you're in there."
                .into(),
        },
        TranscriptMessage {
            id: "a1".into(),
            role: Role::Assistant,
            text: "The times were stored as local time; they are UTC now, and the cache TTL is 40.".into(),
        },
    ];
    let answer = |kind: &str, content: &str| format!(r#"{{"facts": [{{"type": "{kind}", "content": "{content}"}}]}}"#);
    let kept = |kind: &str, content: &str| parse_facts(&answer(kind, content), &messages).unwrap().len() == 1;
    // The developer's report and request, copied: what came of them is the agent's answer.
    assert!(!kept("bugfix", "The show times have been an hour off since the clocks changed on Sunday."));
    assert!(!kept("decision", "Raise the cache TTL to 40 instead of 20."), "punctuation and case aside");
    assert!(!kept("config", "raise the cache ttl to 40 instead of 20 while you're in there, as asked"), "a tail added");
    // What the agent said, a paraphrase, another kind, or too short to be a copy: kept.
    assert!(kept("bugfix", "The show times were stored as local time; they are UTC now."));
    assert!(kept("config", "The cache TTL is 40, raised from 20."));
    assert!(kept("preference", "Raise the cache TTL to 40 instead of 20."), "a rule is the rule reader's");
    assert!(kept("decision", "Raise the cache TTL."), "fewer than twenty characters");
}
