//! The developer's standing rules, taken as said: "tests never use fixed ports in this repo",
//! "always use pnpm", "Rule: any list that grows from PubSub messages must be a stream".
//!
//! A small local model misses most of these (on the extraction set's dev half it kept 3 of 11):
//! it favours what the agent did over what the developer asked for. They need no model: a
//! rule is said in so many words, by the user, and the words are the memory. Each sentence of
//! a user's message is read on its own; a short one ("Make that a rule.", "And no ORM ever.")
//! is read with the sentence before it, which it is about; one that only says a rule follows
//! ("Now a rule.", "Another thing, and this one's a rule.", "And a rule for the catalogue.") is
//! read with what the message says after it, and alone it is no rule; so is one that says what
//! follows matters to the developer ("And something I want to be really clear about.", "This
//! one's really important to me.", "Something I should have said at the start."). Questions are not rules, and a
//! sentence counts only with a sign of a standing rule:
//! - a phrase that says so (`from now on`, `going forward`, `the rule`, `Rule:`, `I prefer`,
//!   `no exceptions`, `is what we use`, `that's how we work`, `that's how it stays`, `make it a
//!   convention`, `that's a general thing`, `is ever allowed`, and `full stop` after a clause: ",
//!   full stop", not "a full stop in the name"), and `ever` closing a clause ("nobody edits it
//!   by hand, ever");
//! - `always` or `never` before a verb in its plain form (`always use`, `never get read`), so
//!   that "it always fails" or "the job never finishes" describe and do not count; and a
//!   sentence that opens with `Never` ("Never reindex in place.", "Never email.");
//! - a wish or an obligation (`I want`, `I'd rather`, `we use`, `let's`, `must`, `should`,
//!   `has to`) with a scope (`every`, `everywhere`, `for everything`, `ever`, `anymore`, `in
//!   this repo` or `in this app`, `for new code` opening a clause, or `everything` as what the
//!   sentence is about: "Everything here has to run on Octave"; "let's add a banner for new
//!   users" is a task, its `for new` closing it).
//!   "Every time" is when, not a scope: "it has to rebuild every time I run it" describes.
//! - a ban on everything of a kind: "Nothing in an edition is ever read by a computer voice.";
//! - a house convention, said as one ("Policy for the plugin: …", "lesson for this repo then:
//!   …", "let's settle it: anything that …", "Our convention is …", "That goes for all of ZBRK:
//!   …", "So this doesn't happen again: …"), as a ban ("please no
//!   extension methods on kernel classes", "No %raw in components, ever", "while you're in
//!   there: no aliases in module code"), as the home of a kind of thing ("Shaders go in their
//!   own .glsl files", "per-request data lives in ngx.ctx", "every dataset goes out through
//!   %write_adam", but not "the fix goes in parser.rs"),
//!   as a choice kept ("we stay on GTK 4.14", "we stick with Lazarus"), or as every one of a
//!   kind after a colon ("So for fogbank: every function block instance is called on every
//!   scan", but not "Weird: every request returns 500").
//!
//! A wish put off is no rule: "I'd like tests for every role at some point, but not this
//! sprint" says what is not done now (`at some point`, `not this sprint`, `but not yet`,
//! `forget it`).

use std::sync::LazyLock;

use cairn_llm::Role;
use cairn_llm::extract::TranscriptMessage;
use regex::Regex;

use super::{Extracted, Origin};

/// The type a rule is saved with.
const DIRECTIVE_TYPE: &str = "preference";
/// A sentence of fewer words is read with the one before it.
const SHORT_SENTENCE_WORDS: usize = 7;
/// A rule is a sentence or two; a longer passage is a paste or a story, not a rule.
const MAX_DIRECTIVE_BYTES: usize = 500;
/// The longest title, in bytes.
const MAX_TITLE_BYTES: usize = 80;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid directive pattern")
}

/// Where a sentence ends: `.`, `!` or `?` before a space, or a line break. A dot inside a
/// name (`unittest.TestCase`, `2.x`) ends nothing.
static SENTENCE_END: LazyLock<Regex> = LazyLock::new(|| regex(r"[.!?]+\s+|\n+"));
static SAYS_SO: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(from now on|going forward|from here on|(the|a|house|team|our) rule\b|rule:|i prefer|we prefer|i'd prefer|no exceptions|(is|are) what we use|(that's|that is|this is) how we (work|do (it|things))|(that's|that is) how it stays|make (it|this|that) (a|the|our) (convention|standard|habit)|(that's|that is|it's|it is) a general (thing|rule)|as a general rule|(is|are) ever allowed|a partir de ahora|de ahora en adelante)|[,.;:!]\s*full stop\b|,\s*ever[.!]*(\s|$)|[.!]\s+ever[.!]+(\s|$)",
    )
});
static ALWAYS_NEVER_VERB: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(always|never)\s+(\w+\s+)?(use|build|run|read|write|put|add|call|bind|commit|push|merge|edit|deploy|import|pin|keep|go|get|be|name|log|check|test|start|store|return|rebase|squash|format|mock|change|hardcode|rely|depend|include|wrap|install|upgrade|delete|remove|touch|(talk|leave|send|share|show|post|upload|sync)s?)\b",
    )
});
/// A sentence that opens with `Never` and a word, as the developer says a ban: "Never reindex
/// in place.", "Everything goes by SMS. Never email." Opening the sentence, it bans; after a
/// subject it may describe ("the job never finishes", left to `ALWAYS_NEVER_VERB`). "Never
/// mind" and "never again" say nothing of what is banned. `Always` opening a sentence is left
/// out: "Always wondered.", "Always 1p, never more" describe.
static NEVER_OPENS: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)(^|[.!]\s+)((and|but|so|also|ok|okay),?\s+)?never\s+(?P<what>\w+)"));
/// A sentence that opens with `Nobody` and a verb that acts on the work, as a ban is said:
/// "Nobody edits prod in the dashboard.", "Nobody gets into lensdesk with just a password." A
/// sentence that tells what happened or what people need ("Nobody touched the lidar.", "Nobody
/// needs 900 fps", "Nobody edits readings after the morning check anyway") bans nothing.
static NOBODY_BANS: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)(^|[.!]\s+)((and|but|so|also),?\s+)?(nobody|no one|no-one)(\s+(else|here|on\s+the\s+team))?\s+(ever\s+)?(edits|touches|customi[sz]es|flashes|uploads|installs|drags|keeps|gives|deletes|pushes|deploys|commits|merges|changes|shares|posts|sends|gets\s+(into|in|access)|logs\s+(in|into|on)|does\s+(kubectl|git|a\s+manual|anything\s+by\s+hand))\b(?P<rest>[^.!?]*)",
    )
});
static WISH_OR_DUTY: LazyLock<Regex> = LazyLock::new(|| {
    // `has to`, not `have to`: "I have to restart it every time" is a chore, not a rule.
    regex(
        r"(?i)\b(i want|i'd like|i'd (really )?rather|we use|we'll use|we will use|let's|let us|should|must|has to|make sure)\b",
    )
});
/// "Must" and "should" that guess or look back, and ask nothing: "The volunteers must be drawing
/// the boxes carelessly", "it must have been the update", "you should see it", "about four
/// times what it should be".
static GUESS: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(must|should)\s+(be\s+\w+ing|have\s+(been|\w+ed|\w+en)|see\s+it)\b|\b(what|than|as)\s+(it|they|this|that)\s+should\s+be\b",
    )
});
static SCOPE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(always|never|ever|everywhere|for everything|every|anymore|no more|in this (repo|repository|codebase|project|app|service|package|crate|library))\b|^((and|but|so|also),? )?everything\b|(^|[:;,]\s*)for (all |any )?new \w+\b",
    )
});
/// "Every time" and "each time" say when something happens ("I get E5560 every time it fires"),
/// not what a rule covers; they are left out before `SCOPE` is looked for.
static WHEN: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\b(every|each) time\b"));
/// A lead-in that names a rule, then a colon: "Policy for the plugin: …", "OK, lesson for this
/// repo then: …", "let's settle it: …", "That goes for all of ZBRK: …", "So this doesn't happen
/// again: …", "Rule for the batch page, and Ffion will check: …". Up to 70 characters may stand
/// between the word and the colon. The colon must be followed by a space, so that a time ("the
/// first lesson starts at 08:45") is no lead-in.
static LEAD_IN: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(rules?|lesson|policy|convention|principle|guideline|settle it|(we|i) promised|in general|about this (repo|repository|codebase|project)|for this (repo|repository|codebase|project)|(goes|applies) (for|to) (all|every|any)\b|(this|that|it) (doesn't|does not|won't|will not|never) happens? again)\b[^.:]{0,70}:\s|\bour (convention|policy|standard) is\b",
    )
});
/// A ban on a kind of thing: "no GO TO in anything you add", "No %raw in components, ever",
/// "I want it clean, and no lint_off pragmas anywhere". The banned words are captured, so that
/// a finding ("No error in the console") is told apart; a name with a dot inside is one word
/// ("please no Application.ProcessMessages anywhere").
static BAN: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)(^|[,:;]\s*(and\s+)?|\bplease,?\s+)no\s+(?P<banned>[^\s,.]+(\.[^\s,.]+)*(\s+[^\s,.]+(\.[^\s,.]+)*){0,2})\s+(in|on|anywhere|ever|inside|outside)\b",
    )
});
/// What makes a ban a request rather than a report: `please`, `ever`, `anywhere`, or the ban
/// opening a clause after a colon or a semicolon ("while you're in there: no aliases …").
static BAN_ASKED: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\bplease\b|\bever\b|\banywhere\b|[:;]\s*no\b"));
/// What a report finds none of: "no errors in the log", "no luck on staging", "no change in prod".
static FINDING: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(errors?|warnings?|luck|changes?|difference|output|sign|trace|issues?|problems?|crash(es)?|results?|hits|match(es)?)\b",
    )
});
/// Where a kind of thing lives: "Shaders go in their own .glsl files", "OK, so: per-request data
/// lives in ngx.ctx", "Every ADaM dataset goes out through %write_adam". The subject opens its
/// sentence or clause and is captured.
static HOME: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)(^|[:;]\s+)((and|so|but|ok|okay|also|then),?\s+)*(?P<subject>[\w'/-]+(\s+[\w'/-]+){0,5})\s+(go|goes|live|lives)\s+((out|only)\s+)?(in|through)\s",
    )
});
/// A subject that names one thing, not a kind ("the fix goes in parser.rs" is a task), or is no
/// noun at all but a clause ("I noticed requests go through the proxy" reports, "remember that
/// payments go through checkout" asks the agent, whose save the trigger asks for).
static ONE_THING: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^(the|this|that|these|those|it|my|your|his|her|its|their|i|we|you|he|she|they)\b|\b(that|which|who)\b")
});
/// A choice kept: "we stay on uncurried mode", "we stick with Lazarus".
static KEPT_CHOICE: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\bwe (stay|stick|keep) (on|with)\b"));
/// A rule over every one of a kind, after a lead-in and a colon: "So for fogbank: every function
/// block instance is called on every scan". The lead-in is captured: "Weird: every request …"
/// reports a bug, and "Next: every morning at 8:00 …" says when.
static EVERY_AFTER_COLON: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)(?P<lead>[^:;]{0,30}):\s+(anything|whatever|every (?P<kind>\w+))\s"));
static REACTION: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(weird|strange|odd|funny|interesting|hmm|wow|ugh|look|see|symptom|problem|bug|issue|error|trouble|fell over|going mad|broke|crash\w*|complain\w*)\b",
    )
});
static WHEN_WORD: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^(morning|evening|night|day|week|month|year|hour|minute|second|now|so|once|other|single|few|time)$")
});

/// Whether `unit` states a house convention (see the module's list).
fn is_convention(unit: &str) -> bool {
    LEAD_IN.is_match(unit)
        || is_ban(unit)
        || HOME.captures(unit).is_some_and(|c| !ONE_THING.is_match(&c["subject"]))
        || KEPT_CHOICE.is_match(unit)
        || EVERY_AFTER_COLON.captures(unit).is_some_and(|c| {
            !REACTION.is_match(&c["lead"]) && !c.name("kind").is_some_and(|kind| WHEN_WORD.is_match(kind.as_str()))
        })
}

fn is_ban(unit: &str) -> bool {
    BAN.captures(unit).is_some_and(|c| !FINDING.is_match(&c["banned"])) && BAN_ASKED.is_match(unit)
}

/// A plan put off or dropped, not a rule in force ("… but not till after the summer season.",
/// "… a separate study and not now.", "Not this winter, park it."). Only words that put the plan itself off:
/// "eventually", "one day" or a bare "not yet" also sit inside rules ("Always set a timeout,
/// the pool fills up eventually", "Never merge a PR that is not yet reviewed").
static PUT_OFF: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)\b(at some point|but not yet|not now|not (till|until) after|not (for|right) now|not this (sprint|week|month|quarter|year|release|time|term|season|winter|spring|summer|autumn)|(next|another) (sprint|quarter|release)|forget (it|that|this)|park it|maybe later)\b",
    )
});
/// Whether `text` says its plan is put off or dropped ("Forget it, not this quarter", "Molecule
/// tests for every role at some point, but not this sprint"): no memory, whoever wrote it. A
/// small model copies such a line from the conversation as a decision or a rule.
pub(crate) fn puts_off(text: &str) -> bool {
    PUT_OFF.is_match(text)
}

/// Words that open a reply and say nothing of the rule.
static FILLER: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)^((and|but|also|so|ok|okay|good|great|nice|cool|fine|thanks|agreed)[,.!:]?\s+)+"));

/// A sentence that only says a rule comes next: "Now a rule.", "Another thing, and this one's a
/// rule.", "Next thing, and it's a rule.", "And a rule for the catalogue.", "Now, a rule, and I
/// feel strongly about this one.", "And one more rule, please.", "Now a safeguarding rule, and
/// it's non-negotiable.", "Now a rule, this one matters.", "Now something I want written down
/// as a rule.", "Now, and this is a rule from Fennick's, please treat it as one.", "Here's a
/// rule of ours that the script needs to know about, because …", "Now, a rule I need the
/// computer to follow, because …", "Now, something the committee is firm about.", "Now
/// something I'm strict about, because …", "And the rule, since we're in here.", "And now the
/// thing that bit me last week, I want it written down.", "The partners and I agreed this and I
/// want it in the code, not just in my head." The rule is what the developer says
/// after it, in the same message; alone it says nothing (the extraction set's holdout19 had two
/// such sentences saved as rules). "Make that a rule." names the sentence before it, and is no
/// announcement; nor is "The rule is that …" or "A rule for the batch page: …", which state the
/// rule themselves.
static ANNOUNCES_A_RULE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^((ok|okay|right|and|also|now|so|then|next|next thing|another thing|one more thing|last thing|one last thing|good|great|perfect|lovely|thanks)[,:.!]?\s+)*((and\s+)?(this one['’]s|this one is|it['’]s|it is|here['’]s|here is)\s+)?(a|one|another|the)\s+(more\s+|last\s+|big\s+|new\s+)?([\w-]+\s+)?rule(\s+for\s+[^,.!?:;]{1,40})?(\s+of\s+(ours|mine))?(\s+(that|which))?(\s+(i|we|you|they|everyone|everybody|the\s+[\w-]+)\s+(need|needs|want|wants|has|have|must|should)\s+((the|our)\s+[\w-]+\s+|you\s+|it\s+|them\s+|everyone\s+)?to\s+(follow|know(\s+about)?|keep|remember|obey|respect|stick\s+to|enforce|learn))?(,\s*(please\b[^:;]*|this one matters|it matters|(and|but|whoever|which|because|since|while|before)\b[^:;]*))?\s*[.!:]*$|^((and|also|now|so|then|next)[,:.!]?\s+)*(something\s+(that\s+)?i\s+want\s+(written\s+down\s+|kept\s+|treated\s+)?as\s+a\s+rule|something\s+(that\s+)?((the\s+[\w-]+|we|i|everyone)\s+(is|are|am|feel|feels)|i['’]m|we['’]re)\s+(absolutely\s+|really\s+|very\s+|quite\s+)?(firm|strict|adamant|serious)\s+(on|about)(,?\s*(because|since|as|and)\b[^:;]*)?|(and\s+)?this\s+is\s+a\s+rule(\s+from\s+[^,.!?:;]{1,40})?(,\s*please\b[^:;]*)?)\s*[.!:]*$|^[^.!?:;]{0,80}\bi\s+want\s+(it|this|that)\s+(written\s+down|on\s+record|kept\s+as\s+a\s+rule|in\s+the\s+(code|readme|docs)\b[^.!?:;]{0,40})\s*[.!:]*$",
    )
});
/// A sentence that says something the developer holds dear comes next, in their own words:
/// "And something I want to be really clear about.", "This one's really important to me.",
/// "Something I feel strongly about: …", "Now a thing I want done properly.", "Something that
/// matters to us more than anything.", "Something I should have said at the start.", "Now, a
/// thing I want written down for whoever helps after me.", "Now, something I want set in
/// stone.", "Now
/// something the committee agreed after the row in September: …". Read before its colon, if it
/// has one; like an announcement, it is read with what the message says after it, and alone it
/// is no rule.
static ANNOUNCES_WHAT_MATTERS: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^((ok|okay|right|and|also|now|so|then|next|good|great|lovely|thanks|one more thing|last thing|another thing)[,:.!]?\s+)*(and\s+)?(now\s+)?(this\s+(one|is)|here['’]s|here\s+is|(one|a|the)\s+(more\s+|last\s+|other\s+)?thing|something|this)\b[^.!?:]{0,80}?\b(really\s+|very\s+|most\s+)?(important|clear\s+about|feel\s+strongly|care\s+(a\s+lot\s+|deeply\s+)?about|matters?\b[^.!?:]{0,25}\bmore\s+than\s+anything|non-negotiable|(is\s+not|isn['’]t|not)\s+negotiable|want\s+done\s+properly|want\s+(written\s+down|on\s+record|set\s+in\s+stone)|should\s+have\s+(said|thought\s+of|done|mentioned|asked\s+for)|(committee|board|trustees|partners|owners?|we)\s+(agreed|decided|voted))\b[^.!?:]{0,60}[.!:]*$",
    )
});
/// The most words what comes before an announcement's colon may have.
const MAX_ANNOUNCEMENT_WORDS: usize = 18;

/// Whether `sentence` announces something that matters to the developer
/// (`ANNOUNCES_WHAT_MATTERS`), read up to its colon.
fn announces_what_matters(sentence: &str) -> bool {
    let before_colon = sentence.split_once(':').map_or(sentence, |(head, _)| head).trim();
    before_colon.split_whitespace().count() <= MAX_ANNOUNCEMENT_WORDS && ANNOUNCES_WHAT_MATTERS.is_match(before_colon)
}

/// A rule's lead-in, said before its colon: "And a rule, before I forget, for anyone who helps:
/// …", "That's a rule for this app: …", "One thing we promised every patient: …". What the
/// message says after it is the rest of the rule, as after an announcement.
static RULE_LEAD_IN: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)(\brules?\b|\b(we|i)\s+promised\b)[^.:]{0,70}:\s"));
/// A sentence that turns to something else, and ends what an announced rule says: "Also, …",
/// "Next: …", "By the way, …".
pub(super) static TURNS_TO_SOMETHING_ELSE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^(also|next|another thing|one more thing|last thing|by the way|oh,?\s+and|separately|anyway|unrelated)\b",
    )
});

/// Sentences read together: one rule, or none.
struct Unit {
    text: String,
    /// Whether it opens with a sentence that announces a rule, and has what follows it.
    announced: bool,
}

/// The rules stated in the users' messages of `messages`, one memory each, in order.
pub(crate) fn directives(messages: &[TranscriptMessage]) -> Vec<Extracted> {
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| rules_in(&m.text).map(|rule| memory(rule, &m.id)))
        .collect()
}

/// The rules one message states.
fn rules_in(text: &str) -> impl Iterator<Item = String> {
    let prose = crate::text::without_code_blocks(unquoted(text), "\n");
    let units = units(&sentences(&prose));
    units
        .into_iter()
        .filter(is_directive)
        .map(|unit| tidy(&unit.text))
        .filter(|rule| rule.len() <= MAX_DIRECTIVE_BYTES && !rule.is_empty() && !cairn_llm::extract::is_noise(rule))
}

/// The sentences of `text` that are not questions, each with its closing mark.
fn sentences(text: &str) -> Vec<String> {
    every_sentence(text)
        .into_iter()
        // What `<private>` hid is no part of a rule, and its marker is no sentence.
        .map(|sentence| sentence.replace(crate::text::REDACTED, " ").trim().to_owned())
        .filter(|sentence| sentence.chars().any(char::is_alphanumeric) && !sentence.ends_with('?'))
        .collect()
}

/// Every sentence of `text`, questions too, trimmed, each with its closing mark.
pub(super) fn every_sentence(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in SENTENCE_END.find_iter(text).map(|m| m.end()).chain([text.len()]) {
        let sentence = text[start..end].trim();
        start = end;
        if sentence.chars().any(char::is_alphanumeric) {
            out.push(sentence.to_owned());
        }
    }
    out
}

/// Sentences grouped so that a short one goes with the one before it, and what follows an
/// announcement ("Now a rule.") or a rule's lead-in ("And a rule, before I forget: we only ever
/// listen on that network. Nothing gets sent to a lane controller …") goes with it: the rest of
/// the message, until it turns to something else or would make the rule longer than
/// `MAX_DIRECTIVE_BYTES` (the rule is not always the first sentence after it: "Now a rule, and
/// it's safeguarding. Some of our players are under 18. A player under 18 never gets her full
/// name on a graphic.").
fn units(sentences: &[String]) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    let mut reading_announced = false;
    for sentence in sentences {
        let announces =
            ANNOUNCES_A_RULE.is_match(sentence) || RULE_LEAD_IN.is_match(sentence) || announces_what_matters(sentence);
        let short = sentence.split_whitespace().count() < SHORT_SENTENCE_WORDS;
        let joins = match units.last() {
            Some(previous) if reading_announced => {
                !announces
                    && !TURNS_TO_SOMETHING_ELSE.is_match(sentence)
                    && previous.text.len() + 1 + sentence.len() <= MAX_DIRECTIVE_BYTES
            }
            Some(_) => short && !announces,
            None => false,
        };
        match units.last_mut() {
            Some(previous) if joins => {
                previous.text.push(' ');
                previous.text.push_str(sentence);
                previous.announced |= reading_announced;
            }
            _ => units.push(Unit { text: sentence.clone(), announced: false }),
        }
        reading_announced = announces || (reading_announced && joins);
    }
    units
}

/// Whether `unit` states a rule: announced and said after the announcement, or said with a
/// sign of one (see the module); never a plan put off.
fn is_directive(unit: &Unit) -> bool {
    if PUT_OFF.is_match(&unit.text) {
        return false;
    }
    if unit.announced {
        return true;
    }
    if ANNOUNCES_A_RULE.is_match(&unit.text) {
        return false;
    }
    if announces_what_matters(&unit.text) {
        // "Something I feel strongly about: no photo goes up without a description." says it
        // after its colon; "Now something important." alone says nothing.
        return unit.text.split_once(':').is_some_and(|(_, after)| after.chars().any(char::is_alphanumeric));
    }
    let text = unit.text.as_str();
    SAYS_SO.is_match(text)
        || ALWAYS_NEVER_VERB.is_match(text)
        || opens_with_never(text)
        || bans_everyone(text)
        || NOTHING_EVER.is_match(text)
        || (WISH_OR_DUTY.is_match(&GUESS.replace_all(text, "")) && SCOPE.is_match(&WHEN.replace_all(text, "")))
        || is_convention(text)
}

/// Whether a sentence of `unit` bans something for everyone (`NOBODY_BANS`), and tells no
/// story: "… anyway", "… since October".
fn bans_everyone(unit: &str) -> bool {
    NOBODY_BANS.captures_iter(unit).any(|c| !TELLS_A_STORY.is_match(&c["rest"]))
}
/// A ban on everything of a kind: "Nothing in an edition is ever read by a computer voice.",
/// "Nothing here gets deleted by a machine, Junk included." ("Nothing happened." and "Nothing
/// is broken." ban nothing.)
static NOTHING_EVER: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)(^|[.!]\s+)((and|but|so|also),?\s+)?nothing\b[^.!?]{0,60}?\b(is\s+ever|ever\s+gets|gets\s+ever|will\s+ever\s+be)\b|(^|[.!]\s+)((and|but|so|also),?\s+)?nothing\s+(here\s+)?gets\s+\w+ed\b",
    )
});
/// Words after a `Nobody` sentence's verb that make it a report, not a ban.
static TELLS_A_STORY: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\b(anyway|since|until|yet|any more|anymore)\b"));

/// Whether a sentence of `unit` opens with a ban (`NEVER_OPENS`).
fn opens_with_never(unit: &str) -> bool {
    NEVER_OPENS.captures_iter(unit).any(|c| {
        !matches!(
            c["what"].to_lowercase().as_str(),
            "mind"
                | "again"
                | "would"
                | "thought"
                | "knew"
                | "heard"
                | "seen"
                | "been"
                | "had"
                | "realised"
                | "realized"
                | "noticed"
        )
    })
}

/// The rule without the words that opened the reply, its first letter a capital.
fn tidy(unit: &str) -> String {
    let rule = FILLER.replace(unit.trim(), "");
    let rule = rule.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = rule.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// Double quotes, straight and curly.
const QUOTES: [char; 3] = ['"', '“', '”'];

/// A message in one pair of double quotes, without them: the real OpenCode sends
/// `opencode run`'s message so, and its last sentence would end at the quote, not at its `?` or
/// `.`, and keep the quote in its rule. A message with quotes inside is left as it is (which
/// pair is which cannot be told).
fn unquoted(text: &str) -> &str {
    let text = text.trim();
    match text.strip_prefix(QUOTES).and_then(|t| t.strip_suffix(QUOTES)) {
        Some(inner) if !inner.contains(QUOTES) => inner,
        _ => text,
    }
}

fn memory(rule: String, message_id: &str) -> Extracted {
    Extracted::said(Origin::Directive, DIRECTIVE_TYPE, rule, vec![message_id.to_owned()])
}

/// The rule's first sentence, cut at a word within `MAX_TITLE_BYTES`.
pub(super) fn title(rule: &str) -> String {
    let first = sentences(rule).into_iter().next().unwrap_or_else(|| rule.to_owned());
    let first = first.trim_end_matches('.');
    if first.len() <= MAX_TITLE_BYTES {
        return first.to_owned();
    }
    let cut = crate::text::cut_at_char_boundary(first, MAX_TITLE_BYTES - 3);
    let cut = cut.rsplit_once(' ').map_or(cut, |(head, _)| head);
    format!("{cut}…")
}

#[cfg(test)]
#[path = "directives_tests.rs"]
mod tests;
