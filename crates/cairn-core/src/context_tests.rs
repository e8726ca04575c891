use time::Duration;

use crate::context::ContextRequest;
use crate::prompts::NewPrompt;
use crate::sessions::NewSession;
use crate::testutil::{core_with_clock, obs};

#[test]
fn empty_store_gives_empty_context() {
    let (s, _) = core_with_clock();
    let ctx = s.context(&ContextRequest::default()).unwrap();
    assert_eq!(ctx.context, "");
}

#[test]
fn sections_pinned_first_no_duplicates_within_budget() {
    let (mut s, clock) = core_with_clock();
    s.store
        .start_session(&NewSession {
            id: "s1".into(),
            project: Some("p".into()),
            agent: Some("opencode".into()),
            ..Default::default()
        })
        .unwrap();
    let pinned = s.store.save(&obs("p", "Always run cargo fmt", "CI rejects unformatted code")).unwrap().id;
    s.store.set_pinned(pinned, true).unwrap();
    for i in 0..5 {
        clock.advance(Duration::minutes(1));
        let mut o = obs("p", &format!("memory {i}"), &format!("content {i}"));
        o.session_id = Some("s1".into());
        s.store.save(&o).unwrap();
    }
    s.store.end_session("s1", Some("Refactored the parser")).unwrap();
    s.store
        .add_prompt(&NewPrompt {
            content: "fix the parser".into(),
            session_id: Some("s1".into()),
            ..Default::default()
        })
        .unwrap();
    s.store.save(&obs("other", "not mine", "elsewhere")).unwrap();

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
    let (mut s, _) = core_with_clock();
    let mut pref = obs("elsewhere", "Prefers small commits", "Keep commits small and focused");
    pref.scope = Some("personal".into());
    s.store.save(&pref).unwrap();
    s.store.save(&obs("p", "Local fact", "only here")).unwrap();
    let ctx = s.context(&ContextRequest { project: Some("p".into()), ..Default::default() }).unwrap();
    assert!(ctx.context.contains("### Personal"), "{}", ctx.context);
    assert!(ctx.context.contains("Prefers small commits"));
    assert_eq!(ctx.context.matches("Prefers small commits").count(), 1);
}

mod memory_block {
    use time::Duration;

    use crate::agent::CompactionSave;
    use crate::context::{ContextLayout, ContextRequest};
    use crate::memory::NewObservation;
    use crate::testutil::{core_with_clock, obs};

    fn typed(project: &str, kind: &str, title: &str, content: &str) -> NewObservation {
        NewObservation { kind: Some(kind.into()), ..obs(project, title, content) }
    }

    fn block(query: Option<&str>) -> ContextRequest {
        ContextRequest {
            project: Some("shop".into()),
            layout: ContextLayout::MemoryBlock,
            query: query.map(str::to_owned),
            similarity_threshold: Some(0.3),
            max_relevant: Some(5),
            max_profile: Some(5),
            ..ContextRequest::default()
        }
    }

    /// A store with one memory for each section (and a compaction summary newer than the
    /// session summary: it is the "Last Session").
    fn filled() -> crate::Core {
        let (mut s, clock) = core_with_clock();
        let step = |s: &mut crate::Core, new: NewObservation| {
            clock.advance(Duration::days(1));
            s.store.save(&new).unwrap().id
        };
        step(&mut s, typed("shop", "project-brief", "Shop", "An online shop for bicycle parts"));
        step(&mut s, typed("shop", "architecture", "Hexagonal core", "Ports and adapters around the order domain"));
        step(&mut s, typed("shop", "config", "Postgres pool", "Pool size 20, statement timeout 5s"));
        step(&mut s, typed("shop", "progress", "Checkout", "Payments done, refunds in progress"));
        step(
            &mut s,
            typed("shop", "bugfix", "Stripe webhook retries", "Webhooks retried twice: made the handler idempotent"),
        );
        step(&mut s, typed("shop", "decision", "Use Stripe for payments", "Chosen over Adyen for the API"));
        let mut pref = typed("elsewhere", "preference", "Small commits", "The user wants small focused commits");
        pref.scope = Some("user".into());
        step(&mut s, pref);
        s.store.save_session_summary(Some("s-old"), Some("shop"), "## Goal\nold session").unwrap();
        clock.advance(Duration::days(1));
        let compaction = CompactionSave {
            session_id: "s-new".into(),
            project: Some("shop".into()),
            summary: "## Goal\nRefunds through Stripe\n## Accomplished\nWebhook handler".into(),
            ..CompactionSave::default()
        };
        s.store.save_compaction(&compaction).unwrap();
        s
    }

    #[test]
    fn sections_in_order_with_relevant_hits() {
        let s = filled();
        let ctx = s.context(&block(Some("stripe webhook"))).unwrap();
        insta::assert_snapshot!(ctx.context);
        let ids: std::collections::HashSet<_> = ctx.memory_ids.iter().collect();
        assert_eq!(ids.len(), ctx.memory_ids.len(), "no memory twice");
        let last = ctx.context.split("## Last Session").nth(1).and_then(|rest| rest.split("\n## ").next());
        assert!(!last.unwrap_or_default().contains("old session"), "only the newest summary is the Last Session");
        assert_eq!(ctx.bytes, ctx.context.len());
    }

    #[test]
    fn the_query_is_plain_words_not_search_syntax() {
        // `opencode run "fix the stripe webhook"` arrives quoted; as a phrase it would match
        // nothing, as words it finds the webhook fix.
        let s = filled();
        let quoted = s.context(&block(Some("\"fix the stripe webhook*\""))).unwrap().context;
        assert!(quoted.contains("## Relevant") && quoted.contains("Stripe webhook retries"), "{quoted}");
    }

    #[test]
    fn empty_sections_omitted_and_budget_kept() {
        let (s, _) = core_with_clock();
        let nothing = s.context(&block(Some("anything"))).unwrap().context;
        assert!(nothing.starts_with("[MEMORY] Nothing is stored") && !nothing.contains('\n'), "one line: {nothing}");
        let s = filled();
        let no_query = s.context(&block(None)).unwrap().context;
        assert!(!no_query.contains("## Relevant") && no_query.starts_with("[MEMORY]\n"));
        for budget in [10, 120, 400] {
            let small = s.context(&ContextRequest { budget_bytes: budget, ..block(Some("stripe")) }).unwrap();
            assert!(small.context.len() <= budget && small.truncated, "{budget}: {}", small.context.len());
        }
        let strict = s.context(&ContextRequest { similarity_threshold: Some(1.0), ..block(Some("stripe webhook")) });
        let strict = strict.unwrap().context;
        assert_eq!(strict.matches("## Relevant").count(), 1, "only the best hit (100%) passes:\n{strict}");
        let bad = s.context(&ContextRequest { similarity_threshold: Some(1.5), ..block(Some("x")) }).unwrap_err();
        assert_eq!(bad.code, crate::ErrorCode::InvalidArgument);
    }
}
