use super::*;
use crate::extract::taken_back::tests::said;

fn contents(text: &str) -> Vec<String> {
    refusals(&said(&[(Role::User, text)])).into_iter().map(|r| r.content).collect()
}

#[test]
fn a_suggestion_turned_down_is_saved_with_its_reason() {
    let saved = refusals(&said(&[
        (Role::User, "The sync works now."),
        (Role::Assistant, "Good."),
        (
            Role::User,
            "Great. Also, Dad asked if I'd make it for iPhone for his mate. No. Neither of us has a Mac \
             and I'm not paying Apple £79 a year for one user. Android only. Next: what counts as overdue?",
        ),
    ]));
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(
        saved[0].content,
        "Also, Dad asked if I'd make it for iPhone for his mate. No. Neither of us has a Mac and I'm not \
         paying Apple £79 a year for one user. Android only."
    );
    assert_eq!((saved[0].origin, saved[0].kind.as_str()), (Origin::Refusal, "decision"));
    assert_eq!(saved[0].message_ids, ["m2"]);
}

#[test]
fn every_way_of_saying_no_counts() {
    for refusal in
        ["No.", "No then.", "I'm not having it.", "We're not doing it.", "I've decided no.", "No, we're not."]
    {
        let text = format!("Kieran keeps on at me to put Stripe on the shop. {refusal} Pieces are one-offs.");
        assert_eq!(contents(&text).len(), 1, "{refusal:?}");
    }
}

#[test]
fn a_no_that_answers_nothing_suggested_saves_nothing() {
    for text in [
        "Did it work? No. The log is empty.",
        "The build failed again. No. I mean it passed.",
        "Dad asked if I'd make it for iPhone.",
        "No. Not yet.",
    ] {
        assert!(contents(text).is_empty(), "{text:?}");
    }
    // What was private is never copied.
    let private = format!("Kit asked for {} on the shop. No. We stay as we are.", crate::text::REDACTED);
    assert!(contents(&private).is_empty());
}

#[test]
fn the_reason_stops_at_a_question_or_a_turn_to_something_else() {
    assert_eq!(
        contents("Mo wants a tracking page. No. They get a text. Next: the printer. It jams."),
        ["Mo wants a tracking page. No. They get a text."]
    );
    assert_eq!(
        contents("Gwen asked for a leaderboard. No. What would it even show?"),
        ["Gwen asked for a leaderboard. No."]
    );
    assert_eq!(
        contents("Someone keeps asking for a proper app. No. Not happening. Thanks very much."),
        ["Someone keeps asking for a proper app. No. Not happening."]
    );
}

#[test]
fn more_ways_of_asking_and_saying_no() {
    assert_eq!(
        contents(
            "The Guild keeps emailing us to use their portal instead of our own PDFs. We're not. It costs 40p \
             a certificate. We keep making our own."
        ),
        ["The Guild keeps emailing us to use their portal instead of our own PDFs. We're not. It costs 40p a \
          certificate. We keep making our own."]
    );
    assert_eq!(
        contents("Aled wants watch.py to email the guests directly. I'm saying no. A person reads it first.").len(),
        1
    );
    // "I'm not sure." says no to nothing.
    assert!(contents("Aled wants watch.py to email the guests. I'm not sure. What do you think?").is_empty());
}

#[test]
fn a_memory_that_only_says_no_is_told_apart() {
    for bare in ["I'm saying no.", "No.", " We're not. ", "I've decided no."] {
        assert!(only_says_no(bare), "{bare:?}");
    }
    assert!(!only_says_no("No guest is emailed by the script; tour ops decide."));
    assert!(!only_says_no("I'm not sure."));
}
