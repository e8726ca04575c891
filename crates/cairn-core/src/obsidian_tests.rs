//! The Obsidian export: names, notes, links, hubs, and the incremental writer that never
//! overwrites a note edited in the vault.

use std::path::Path;

use crate::ErrorCode;
use crate::memory::{NewObservation, ObservationPatch};
use crate::model::Relation;
use crate::obsidian::{
    CAIRN_COPY_SUFFIX, HUB_DIR, KeptReason, STATE_FILE, cairn_copy_path, export_vault, plan, render_note_for, slug,
};
use crate::store::Store;
use crate::testutil::{obs, store_with_clock};
use crate::transfer::ExportData;

fn saved(store: &mut Store, project: &str, title: &str, content: &str) -> i64 {
    store.save(&obs(project, title, content)).unwrap().id
}

fn note_paths(data: &ExportData) -> Vec<String> {
    plan(data).into_iter().map(|f| f.path).filter(|p| !p.starts_with(HUB_DIR)).collect()
}

fn note_of(data: &ExportData, id: i64) -> String {
    let o = data.observations.iter().find(|o| o.id == id).unwrap();
    render_note_for(o, data)
}

fn path_of(data: &ExportData, id: i64) -> String {
    let sync = &data.observations.iter().find(|o| o.id == id).unwrap().sync_id;
    let tail: String = sync.chars().filter(char::is_ascii_hexdigit).collect();
    let tail = &tail[tail.len() - 8..];
    note_paths(data).into_iter().find(|p| p.contains(tail)).unwrap()
}

#[test]
fn slugs_are_lowercase_words_safe_on_every_os_and_bounded() {
    assert_eq!(slug("Fix: JWT/refresh <b>race</b> [[link]]"), "fix-jwt-refresh-b-race-b-link");
    assert_eq!(slug("  ..CON..  "), "con");
    assert_eq!(slug("Ünïcode 日本語 title"), "ünïcode-日本語-title");
    assert_eq!(slug("\u{0}\u{7}\n\t"), "");
    let long = slug(&"日本".repeat(200));
    assert!(long.len() <= 80, "{}", long.len());
    assert!(long.is_char_boundary(long.len()));
    for c in ['/', '\\', ':', '*', '?', '"', '<', '>', '|', '#', '^', '[', ']'] {
        assert!(!slug(&format!("a{c}b")).contains(c));
    }
}

#[test]
fn note_names_stay_unique_when_titles_collide_after_slugging_and_folders_avoid_device_names() {
    let (mut store, _) = store_with_clock();
    saved(&mut store, "con", "Auth: token", "first");
    saved(&mut store, "con", "auth / TOKEN", "second");
    saved(&mut store, "con", "AUTH -- token!", "third");
    let data = store.export(None).unwrap();
    let paths = note_paths(&data);
    let lowered: std::collections::HashSet<String> =
        paths.iter().map(|p| p.rsplit('/').next().unwrap().to_lowercase()).collect();
    assert_eq!(lowered.len(), paths.len(), "{paths:?}");
    for p in &paths {
        assert!(p.starts_with("con_/"), "a Windows device name gets a `_`: {p}");
        let name = p.rsplit('/').next().unwrap();
        assert!(name.len() < 120 && name.ends_with(".md"), "{name}");
        assert!(!name.chars().any(|c| c.is_control() || ":*?\"<>|\\".contains(c)), "{name}");
    }
    assert!(paths.iter().any(|p| p.contains("/auth-token-")), "{paths:?}");
}

#[test]
fn a_note_has_front_matter_escaped_title_content_and_hub_links() {
    let (mut store, _) = store_with_clock();
    let id = store
        .save(&NewObservation {
            title: "Use [[x]] <script>alert(1)</script> *not bold*".into(),
            content: "Body line\n\nwith **markdown** and a `code` span".into(),
            kind: Some("decision".into()),
            project: Some("cairn".into()),
            topic_key: Some("auth/jwt".into()),
            pinned: true,
            ..NewObservation::default()
        })
        .unwrap()
        .id;
    let data = store.export(None).unwrap();
    let o = data.observations.iter().find(|o| o.id == id).unwrap().clone();
    let tail = &o.sync_id.replace('-', "")[24..];
    let note =
        note_of(&data, id).replace(&o.sync_id, "<sync-id>").replace(&o.session_id, "<session>").replace(tail, "<tail>");
    insta::assert_snapshot!(note);
    // The escaped heading opens no link; the label of a link cannot end it early.
    let heading = note.lines().find(|l| l.starts_with("# ")).unwrap();
    assert!(!heading.contains("[[") && !heading.contains("<script>"), "{heading}");
}

#[test]
fn judged_relations_link_both_notes_and_skip_deleted_or_pending_ones() {
    let (mut store, _) = store_with_clock();
    let a = saved(&mut store, "p", "New rule", "use argon2");
    let b = saved(&mut store, "p", "Old rule", "use bcrypt");
    let c = saved(&mut store, "p", "Gone rule", "deleted soon");
    store.delete(c, false).unwrap();
    let mut data = store.export(None).unwrap();
    let sync = |id: i64| data.observations.iter().find(|o| o.id == id).unwrap().sync_id.clone();
    let relation = |id: i64, source: String, target: String, verdict: &str, status: &str| Relation {
        id,
        sync_id: format!("rel-{id}"),
        source_id: source,
        target_id: target,
        relation: verdict.into(),
        reason: None,
        evidence: None,
        confidence: None,
        judgment_status: status.into(),
        marked_by_actor: None,
        marked_by_kind: None,
        marked_by_model: None,
        session_id: None,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
    };
    let relations = vec![
        relation(1, sync(a), sync(b), "supersedes", "judged"),
        relation(2, sync(a), sync(c), "conflicts_with", "judged"),
        relation(3, sync(b), sync(a), "pending", "pending"),
    ];
    data.relations = relations;
    let new_note = note_of(&data, a);
    let old_note = note_of(&data, b);
    let old_name = path_of(&data, b).rsplit('/').next().unwrap().trim_end_matches(".md").to_owned();
    let new_name = path_of(&data, a).rsplit('/').next().unwrap().trim_end_matches(".md").to_owned();
    assert!(new_note.contains(&format!("- supersedes [[{old_name}|Old rule]]")), "{new_note}");
    assert!(old_note.contains(&format!("- [[{new_name}|New rule]] supersedes this")), "{old_note}");
    assert!(!new_note.contains("conflicts with"), "a deleted memory has no note to link: {new_note}");
    assert_eq!(old_note.matches("## Related").count(), 1, "the pending candidate adds nothing");
    assert_eq!(note_paths(&data).len(), 2, "the deleted memory has no note");
}

#[test]
fn hubs_per_project_and_type_link_their_memories() {
    let (mut store, _) = store_with_clock();
    saved(&mut store, "alpha", "One", "x");
    saved(&mut store, "beta", "Two", "y");
    let files = plan(&store.export(None).unwrap());
    let hub = |name: &str| files.iter().find(|f| f.path == format!("{HUB_DIR}/{name}.md")).unwrap().text.clone();
    assert!(hub("project-alpha").contains("|One]]") && !hub("project-alpha").contains("|Two]]"));
    let manual = hub("type-manual");
    assert!(manual.contains("## alpha") && manual.contains("## beta"), "{manual}");
}

#[test]
fn private_content_never_reaches_the_vault() {
    let (mut store, _) = store_with_clock();
    saved(&mut store, "p", "key <private>hunter2</private>", "the token is <private>s3cret</private> ok");
    let dir = tempfile::tempdir().unwrap();
    export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    for entry in walk(dir.path()) {
        let text = std::fs::read_to_string(&entry).unwrap();
        assert!(!text.contains("hunter2") && !text.contains("s3cret"), "{}", entry.display());
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out.sort();
    out
}

#[test]
fn a_second_run_writes_only_what_changed_and_removes_deleted_notes() {
    let (mut store, _) = store_with_clock();
    let a = saved(&mut store, "p", "Stays", "same");
    let b = saved(&mut store, "p", "Changes", "before");
    let c = saved(&mut store, "p", "Goes away", "bye");
    let dir = tempfile::tempdir().unwrap();
    let first = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    assert_eq!((first.notes, first.hubs, first.written.len()), (3, 2, 5));
    assert!(dir.path().join(STATE_FILE).is_file());

    let again = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    assert!(again.written.is_empty() && again.removed.is_empty(), "{again:?}");
    assert_eq!(again.unchanged, 5);

    store.update(b, &ObservationPatch { content: Some("after".into()), ..ObservationPatch::default() }).unwrap();
    let data = store.export(None).unwrap();
    let gone = path_of(&data, c);
    store.delete(c, false).unwrap();
    let data = store.export(None).unwrap();
    let third = export_vault(&data, dir.path(), None).unwrap();
    assert_eq!(
        third.written,
        vec![path_of(&data, b), format!("{HUB_DIR}/project-p.md"), format!("{HUB_DIR}/type-manual.md")]
    );
    assert_eq!(third.removed, vec![gone.clone()]);
    assert!(!dir.path().join(&gone).exists());
    assert!(std::fs::read_to_string(dir.path().join(path_of(&data, b))).unwrap().contains("after"));
    assert!(dir.path().join(path_of(&data, a)).is_file());
}

#[test]
fn a_note_edited_in_the_vault_is_kept_and_cairns_version_goes_beside_it() {
    let (mut store, _) = store_with_clock();
    let id = saved(&mut store, "p", "Edited", "cairn's text");
    let dir = tempfile::tempdir().unwrap();
    export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    let path = path_of(&store.export(None).unwrap(), id);
    let full = dir.path().join(&path);
    std::fs::write(&full, "my own notes").unwrap();

    // Unchanged memory: nothing to write, the edit is simply left alone.
    let quiet = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    assert!(quiet.kept_edited.is_empty() && quiet.written.is_empty(), "{quiet:?}");

    store.update(id, &ObservationPatch { content: Some("newer".into()), ..ObservationPatch::default() }).unwrap();
    let report = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    assert_eq!(std::fs::read_to_string(&full).unwrap(), "my own notes");
    let kept = &report.kept_edited[0];
    assert_eq!((kept.path.as_str(), kept.reason), (path.as_str(), KeptReason::EditedInVault));
    let copy = cairn_copy_path(&path);
    assert!(copy.ends_with(&format!("{CAIRN_COPY_SUFFIX}.md")));
    assert_eq!(kept.cairn_copy.as_deref(), Some(copy.as_str()));
    assert!(std::fs::read_to_string(dir.path().join(&copy)).unwrap().contains("newer"));

    // Deleting the memory does not delete the user's note; cairn's copy goes.
    store.delete(id, false).unwrap();
    let after = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    assert_eq!(std::fs::read_to_string(&full).unwrap(), "my own notes");
    assert!(!dir.path().join(&copy).exists());
    assert_eq!(after.kept_edited[0].reason, KeptReason::EditedNoLongerExported);
    // Reported once: the note is no longer followed.
    let last = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    assert!(last.kept_edited.is_empty(), "{last:?}");
}

#[test]
fn a_file_cairn_never_wrote_is_not_overwritten_even_without_a_state_file() {
    let (mut store, _) = store_with_clock();
    let id = saved(&mut store, "p", "Foreign", "cairn");
    let data = store.export(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = path_of(&data, id);
    std::fs::create_dir_all(dir.path().join(&path).parent().unwrap()).unwrap();
    std::fs::write(dir.path().join(&path), "someone else's").unwrap();
    let report = export_vault(&data, dir.path(), None).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join(&path)).unwrap(), "someone else's");
    assert_eq!(report.kept_edited.len(), 1);
}

#[test]
fn renaming_a_memory_moves_its_note() {
    let (mut store, _) = store_with_clock();
    let id = saved(&mut store, "p", "Before", "x");
    let dir = tempfile::tempdir().unwrap();
    export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    let old = path_of(&store.export(None).unwrap(), id);
    store.update(id, &ObservationPatch { title: Some("After".into()), ..ObservationPatch::default() }).unwrap();
    let report = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap();
    let new = path_of(&store.export(None).unwrap(), id);
    assert_ne!(old, new);
    assert_eq!(report.removed, vec![old.clone()]);
    assert!(dir.path().join(new).is_file() && !dir.path().join(old).exists());
}

#[test]
fn bad_folders_and_state_files_get_their_codes_and_touch_nothing() {
    let (mut store, _) = store_with_clock();
    saved(&mut store, "p", "One", "x");
    let data = store.export(None).unwrap();
    let dir = tempfile::tempdir().unwrap();

    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(export_vault(&data, &file, None).unwrap_err().code, ErrorCode::VaultNotADirectory);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");

    let vault = dir.path().join("vault");
    std::fs::create_dir(&vault).unwrap();
    std::fs::write(vault.join(STATE_FILE), "{not json").unwrap();
    assert_eq!(export_vault(&data, &vault, None).unwrap_err().code, ErrorCode::VaultStateInvalid);
    // A state naming a file outside the folder would let a run remove it.
    let outside = dir.path().join("precious.md");
    std::fs::write(&outside, "keep").unwrap();
    std::fs::write(vault.join(STATE_FILE), r#"{"version":1,"files":{"../precious.md":"00"}}"#).unwrap();
    let err = export_vault(&data, &vault, None).unwrap_err();
    assert_eq!(err.code, ErrorCode::VaultStateInvalid, "{err}");
    assert!(outside.is_file());
    assert_eq!(walk(&vault).len(), 1, "nothing written beside the bad state");
}

#[cfg(unix)]
#[test]
fn a_read_only_folder_is_vault_not_writable() {
    use std::os::unix::fs::PermissionsExt;
    let (mut store, _) = store_with_clock();
    saved(&mut store, "p", "One", "x");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root writes anyway: then the export must simply work.
    let probe = dir.path().join("probe");
    let writable = std::fs::write(&probe, "").is_ok();
    let _ = std::fs::remove_file(&probe);
    let result = export_vault(&store.export(None).unwrap(), dir.path(), None);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    match result {
        Err(err) => assert!(!writable && err.code == ErrorCode::VaultNotWritable, "{err}"),
        Ok(_) => assert!(writable, "a read-only folder was written"),
    }
}

#[test]
fn a_megabyte_of_content_and_markup_in_a_title_are_written_whole_and_harmless() {
    let (mut store, _) = store_with_clock();
    let id = saved(&mut store, "p", "x", "y");
    let mut data = store.export(None).unwrap();
    // Older stores and imports may hold more than a save accepts today.
    let big = "line of text\n".repeat(80_000);
    let o = data.observations.iter_mut().find(|o| o.id == id).unwrap();
    o.content = big.clone();
    o.title = "---\ntitle: injected\n--- ]] [[evil|x]] <img src=x>".into();
    let dir = tempfile::tempdir().unwrap();
    let report = export_vault(&data, dir.path(), None).unwrap();
    assert_eq!(report.notes, 1);
    let text = std::fs::read_to_string(dir.path().join(path_of(&data, id))).unwrap();
    assert!(text.len() > big.len() && text.contains(big.trim_end()));
    let front: Vec<&str> = text.lines().skip(1).take_while(|l| *l != "---").collect();
    assert!(!front.iter().any(|l| l.starts_with("title: injected")), "{front:?}");
    assert!(text.contains(r#"title: "--- title: injected --- ]] [[evil|x]] <img src=x>""#), "{text}");
    let hub = std::fs::read_to_string(dir.path().join(HUB_DIR).join("project-p.md")).unwrap();
    assert!(hub.contains("|--- title: injected --- evil x img src=x]]"), "{hub}");
}

#[test]
fn a_folder_follows_one_project_choice_so_another_never_removes_its_notes() {
    let (mut store, _) = store_with_clock();
    saved(&mut store, "alpha", "A", "x");
    saved(&mut store, "beta", "B", "y");
    let dir = tempfile::tempdir().unwrap();
    let alpha = export_vault(&store.export(Some("alpha")).unwrap(), dir.path(), Some("alpha")).unwrap();
    assert_eq!(alpha.notes, 1);
    let before = walk(dir.path());
    let err = export_vault(&store.export(Some("beta")).unwrap(), dir.path(), Some("beta")).unwrap_err();
    assert_eq!(err.code, ErrorCode::VaultProjectMismatch, "{err}");
    let err = export_vault(&store.export(None).unwrap(), dir.path(), None).unwrap_err();
    assert_eq!(err.code, ErrorCode::VaultProjectMismatch, "{err}");
    assert_eq!(walk(dir.path()), before, "nothing removed or written");
    // The same choice, spelled as the store normalises it, is the same folder.
    assert!(export_vault(&store.export(Some("Alpha")).unwrap(), dir.path(), Some("Alpha")).is_ok());
}
