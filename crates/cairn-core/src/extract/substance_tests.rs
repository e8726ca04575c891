use super::*;

#[test]
fn a_short_plain_report_says_too_little() {
    for thin in [
        "The pipeline restarted.",
        "The roof is fixed.",
        "The title screen is made.",
        "The hook now updates the health collection rules.",
        "Have a good weekend.",
    ] {
        assert!(says_too_little(thin), "{thin}");
    }
}

#[test]
fn a_value_a_name_or_a_path_is_worth_keeping_however_short() {
    for specific in [
        "patience_minutes is 45.",
        "Rollout is 25%.",
        "The Playdate build uses `pdc`.",
        "Disabled greylisting in dovecot/main.cf",
        "The 'Crowd' scene is deleted.",
        "maxDBdays stays put.",
        "The config lives in settings.toml now.",
        "pod removed from endpoints asynchronously after SIGTERM",
        "The Yaesu radios send Mic-E.",
    ] {
        assert!(!says_too_little(specific), "{specific}");
    }
}

#[test]
fn a_short_rule_is_worth_keeping() {
    for rule in [
        "Nothing in this archive is ever deleted.",
        "We stay on QLC+ on the Pi.",
        "Every note has to have a name on it.",
        "After every deploy I want a test that proves it.",
        "No Spotify on the pub system, ever.",
    ] {
        assert!(!says_too_little(rule), "{rule}");
    }
}

#[test]
fn a_longer_sentence_says_enough_whatever_its_words() {
    let long = "The pipeline was slow to acknowledge because every message waits for the lookup and the insert";
    assert!(!says_too_little(long));
    let thirteen = "The team looked at the old printer and the new one and chose the new one";
    assert!(thirteen.split_whitespace().count() > MAX_THIN_WORDS);
    assert!(!says_too_little(thirteen));
}
