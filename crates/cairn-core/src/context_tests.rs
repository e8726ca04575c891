use time::Duration;

use crate::context::ContextRequest;
use crate::prompts::NewPrompt;
use crate::sessions::NewSession;
use crate::testutil::{obs, store_with_clock};

#[test]
fn empty_store_gives_empty_context() {
    let (s, _) = store_with_clock();
    let ctx = s.context(&ContextRequest::default()).unwrap();
    assert_eq!(ctx.context, "");
}

#[test]
fn sections_pinned_first_no_duplicates_within_budget() {
    let (mut s, clock) = store_with_clock();
    s.start_session(&NewSession {
        id: "s1".into(),
        project: Some("p".into()),
        agent: Some("opencode".into()),
        ..Default::default()
    })
    .unwrap();
    let pinned = s.save(&obs("p", "Always run cargo fmt", "CI rejects unformatted code")).unwrap().id;
    s.set_pinned(pinned, true).unwrap();
    for i in 0..5 {
        clock.advance(Duration::minutes(1));
        let mut o = obs("p", &format!("memory {i}"), &format!("content {i}"));
        o.session_id = Some("s1".into());
        s.save(&o).unwrap();
    }
    s.end_session("s1", Some("Refactored the parser")).unwrap();
    s.add_prompt(&NewPrompt { content: "fix the parser".into(), session_id: Some("s1".into()), ..Default::default() })
        .unwrap();
    s.save(&obs("other", "not mine", "elsewhere")).unwrap();

    let ctx = s.context(&ContextRequest { project: Some("p".into()), ..Default::default() }).unwrap();
    let md = &ctx.context;
    assert!(md.find("### Pinned").unwrap() < md.find("### Recent sessions").unwrap());
    assert!(md.contains("Refactored the parser"));
    assert!(md.contains("fix the parser"));
    assert!(!md.contains("not mine"));
    assert_eq!(md.matches("Always run cargo fmt").count(), 1, "pinned not repeated in recent");
    assert_eq!(ctx.memory_ids[0], pinned);
    assert!(!ctx.truncated);

    let small =
        s.context(&ContextRequest { project: Some("p".into()), budget_bytes: 300, ..Default::default() }).unwrap();
    assert!(small.context.len() <= 300, "{}", small.context.len());
    assert!(small.truncated);
    assert!(small.context.contains("Always run cargo fmt"), "pinned survives a small budget");
}

#[test]
fn personal_memories_follow_the_user() {
    let (mut s, _) = store_with_clock();
    let mut pref = obs("elsewhere", "Prefers small commits", "Keep commits small and focused");
    pref.scope = Some("personal".into());
    s.save(&pref).unwrap();
    s.save(&obs("p", "Local fact", "only here")).unwrap();
    let ctx = s.context(&ContextRequest { project: Some("p".into()), ..Default::default() }).unwrap();
    assert!(ctx.context.contains("### Personal"), "{}", ctx.context);
    assert!(ctx.context.contains("Prefers small commits"));
    assert_eq!(ctx.context.matches("Prefers small commits").count(), 1);
}
