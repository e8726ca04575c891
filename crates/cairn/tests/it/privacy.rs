//! Privacy proof (never leak): one scripted session whose every text field carries
//! `<private>…</private>` text with a unique marker, through every door — HTTP (memories,
//! updates, prompts, a session's pending prompt, session summaries, passive capture, relations,
//! import), MCP over stdio
//! (`cairn mcp`, forwarding to the daemon) and the CLI (arguments, stdin, import of a file
//! and of stdin) — with every process logging at debug level. Then no marker may appear in
//! the database, its WAL (read while the daemon runs, before any checkpoint could empty it),
//! any other file of the data dir, `cairn export`, or any process's stdout or stderr; and the
//! public text around every marker must be stored (so the content did get through).

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::{Daemon, McpChild, Rng, cairn, http};

/// Public words and the private markers wrapped next to them.
struct Secrets {
    rng: Rng,
    /// (public word, private marker, where it was sent)
    fields: Vec<(String, String, String)>,
}

impl Secrets {
    /// A field value: a public word (which must be stored) and a private marker (which must
    /// never be), in one of the tag forms users write.
    fn field(&mut self, door: &str) -> String {
        let public = format!("pub{}", self.rng.word(14));
        let secret = format!("sec{}", self.rng.word(20));
        let value = match self.fields.len() % 9 {
            0 => format!("{public} <private>{secret}</private> tail"),
            1 => format!("{public} <PRIVATE>\nkey: {secret}\n</Private>"),
            2 => format!("{public} <private >{secret}"), // unclosed: private to the end
            3 => format!("{public} <private>one</private> and <private>{secret} two</private>"),
            // The shapes a lazy regex leaked: nested, attributes, whitespace inside the tags,
            // self-closing (opens, never closes), a closer with a space.
            4 => format!("{public} <private>a<private>b</private>{secret}</private> tail"),
            5 => format!("{public} <private note=\"x\">{secret}</private> tail"),
            6 => format!("{public} < private\n>{secret}</ private\n> tail"),
            7 => format!("{public} <private/>{secret}"),
            _ => format!("{public} <Private class='k'>{secret}</private > tail"),
        };
        self.fields.push((public, secret, door.to_owned()));
        value
    }
}

#[test]
fn private_text_never_reaches_disk_logs_or_exports() {
    let seed = Rng::seed_from_env("CAIRN_PRIVACY_SEED");
    let mut s = Secrets { rng: Rng::new(seed), fields: Vec::new() };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let work = tmp.path().join("privacy");
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&logs).unwrap();
    let debug = [("CAIRN_LOG", "debug"), ("RUST_LOG", "debug")];
    let daemon_log = logs.join("serve.log");
    let daemon = Daemon::start_with(&data, &debug, Stdio::from(File::create(&daemon_log).unwrap()));
    let addr = daemon.addr;
    // Everything any process answered: it must not echo a secret either.
    let mut answers: Vec<String> = Vec::new();
    let post = |method: &str, path: &str, body: Value, answers: &mut Vec<String>| -> Value {
        let (status, value) = http(addr, method, path, Some(&body));
        assert!((200..300).contains(&status), "{method} {path}: {status} {value}");
        answers.push(value.to_string());
        value
    };

    // ---- HTTP -----------------------------------------------------------------------------
    let session = json!({"id": "priv-http", "project": "privacy", "directory": s.field("http session directory"),
        "agent": s.field("http session agent")});
    post("POST", "/sessions", session, &mut answers);
    let saved = post(
        "POST",
        "/observations",
        json!({"session_id": "priv-http", "project": "privacy", "title": s.field("http title"),
            "content": s.field("http content"), "topic_key": s.field("http topic_key"),
            "tool_name": s.field("http tool_name"), "type": "decision"}),
        &mut answers,
    );
    let http_id = saved["id"].as_i64().unwrap();
    let other = post(
        "POST",
        "/observations",
        json!({"session_id": "priv-http", "project": "privacy", "title": "a public memory to relate to",
            "content": "public content about the deploy pipeline"}),
        &mut answers,
    );
    // Read it back before the update replaces it: the stored fields show their public parts.
    let (status, stored) = http(addr, "GET", &format!("/observations/{http_id}"), None);
    assert_eq!(status, 200, "{stored}");
    answers.push(stored.to_string());
    post(
        "PATCH",
        &format!("/observations/{http_id}"),
        json!({"title": s.field("http patch title"), "content": s.field("http patch content"),
            "topic_key": s.field("http patch topic_key"), "tool_name": s.field("http patch tool_name")}),
        &mut answers,
    );
    post(
        "POST",
        "/prompts",
        // A new session: its directory comes from the prompt.
        json!({"session_id": "priv-http-prompt", "project": "privacy", "content": s.field("http prompt"),
            "directory": s.field("http prompt directory")}),
        &mut answers,
    );
    // A session's pending prompt and context fingerprint (kept in its activity row).
    for body in [
        json!({"event": "prompt", "content": s.field("http activity pending prompt")}),
        json!({"event": "context_injected", "fingerprint": s.field("http activity fingerprint")}),
    ] {
        post("POST", "/sessions/priv-http-prompt/activity", body, &mut answers);
    }
    let learning = s.field("http passive learning");
    post(
        "POST",
        "/observations/passive",
        json!({"session_id": "priv-http", "project": "privacy", "source": s.field("http passive source"),
            "content": format!("Done.\n\n## Key Learnings:\n1. The deploy needs the staging flag set first {learning}\n")}),
        &mut answers,
    );
    post(
        "POST",
        "/conflicts/compare",
        json!({"memory_id_a": http_id, "memory_id_b": other["id"], "relation": "related", "confidence": 0.9,
            "reasoning": s.field("http compare reasoning"), "model": s.field("http compare model")}),
        &mut answers,
    );
    post(
        "POST",
        "/v1/op",
        json!({"op": "session_summary", "args": {"session_id": "priv-http-2", "project": "privacy",
            "content": s.field("http rpc session summary")}}),
        &mut answers,
    );
    // What a host plugin sends (issue 13): user prompts, compaction summaries, session titles.
    post(
        "POST",
        "/v1/op",
        json!({"op": "user_prompt", "args": {"session_id": "priv-http-plugin", "project": "privacy",
            "content": s.field("http plugin user prompt"), "agent": s.field("http plugin agent"),
            "directory": s.field("http plugin directory")}}),
        &mut answers,
    );
    post(
        "POST",
        "/v1/op",
        json!({"op": "save_compaction", "args": {"session_id": "priv-http-plugin", "project": "privacy",
            "summary": s.field("http plugin compaction summary")}}),
        &mut answers,
    );
    post(
        "POST",
        "/sessions",
        json!({"id": "priv-http-plugin", "title": s.field("http plugin session title")}),
        &mut answers,
    );
    post("POST", "/sessions/priv-http/end", json!({"summary": s.field("http session end summary")}), &mut answers);
    let import = import_file(&mut s, "http import", "priv-http-import");
    post("POST", "/import", import, &mut answers);

    // ---- MCP over stdio (forwarding to the daemon) ----------------------------------------
    let mcp_log = logs.join("mcp.log");
    let mut mcp = McpChild::spawn_with(&data, &work, &debug, Stdio::from(File::create(&mcp_log).unwrap()));
    let mut tool = |name: &str, args: Value, answers: &mut Vec<String>| -> Value {
        let result = mcp.call(name, args).unwrap_or_else(|e| panic!("{name}: {e}"));
        answers.push(result.to_string());
        result
    };
    tool(
        "mem_session_start",
        json!({"id": "priv-mcp", "project": "privacy", "directory": s.field("mcp session directory"),
            "agent": s.field("mcp session agent")}),
        &mut answers,
    );
    // No project given: it is detected from the directory, which must not name it.
    tool(
        "mem_session_start",
        json!({"id": "priv-mcp-dir", "directory": s.field("mcp detected directory")}),
        &mut answers,
    );
    tool("mem_save_prompt", json!({"session_id": "priv-mcp", "content": s.field("mcp prompt")}), &mut answers);
    let saved = tool(
        "mem_save",
        json!({"session_id": "priv-mcp", "title": s.field("mcp title"), "content": s.field("mcp content"),
            "topic_key": s.field("mcp topic_key"), "type": "bugfix"}),
        &mut answers,
    );
    let mcp_id = structured_id(&saved);
    tool("mem_get_observation", json!({"id": mcp_id}), &mut answers);
    tool(
        "mem_update",
        json!({"id": mcp_id, "title": s.field("mcp update title"), "content": s.field("mcp update content"),
            "topic_key": s.field("mcp update topic_key")}),
        &mut answers,
    );
    let learning = s.field("mcp passive learning");
    tool(
        "mem_capture_passive",
        json!({"session_id": "priv-mcp", "source": s.field("mcp passive source"),
            "content": format!("## Key Learnings:\n1. Run the migrations before the seed script {learning}\n")}),
        &mut answers,
    );
    tool(
        "mem_compare",
        json!({"memory_id_a": mcp_id, "memory_id_b": http_id, "relation": "related", "confidence": 0.8,
            "reasoning": s.field("mcp compare reasoning")}),
        &mut answers,
    );
    tool(
        "mem_session_summary",
        json!({"session_id": "priv-mcp", "content": s.field("mcp session summary")}),
        &mut answers,
    );
    tool("mem_session_end", json!({"id": "priv-mcp", "summary": s.field("mcp session end summary")}), &mut answers);
    // Read back through MCP too: what an agent is shown must be redacted.
    tool("mem_search", json!({"query": "deploy staging migrations"}), &mut answers);
    tool("mem_context", json!({}), &mut answers);

    // ---- CLI (through the daemon) ---------------------------------------------------------
    let mut outputs: Vec<(String, Output)> = Vec::new();
    let run = |args: &[&str], stdin: Option<&str>| -> Output {
        let mut cmd = cairn();
        cmd.args(args).current_dir(&work).env("CAIRN_DATA_DIR", &data).envs(debug);
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        if let Some(text) = stdin {
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let (title, content, topic) = (s.field("cli title"), s.field("cli content"), s.field("cli topic"));
    let out = run(&["save", &title, &content, "--topic", &topic, "--json"], None);
    let cli_id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_i64().unwrap();
    outputs.push(("cli save".into(), out));
    outputs.push(("cli get".into(), run(&["get", &cli_id.to_string(), "--json"], None)));
    let (title, stdin_content) = (s.field("cli stdin title"), s.field("cli stdin content"));
    outputs.push(("cli save -".into(), run(&["save", &title, "-"], Some(&stdin_content))));
    let (title, content) = (s.field("cli update title"), s.field("cli update content"));
    outputs.push((
        "cli update".into(),
        run(&["update", &cli_id.to_string(), "--title", &title, "--content", &content], None),
    ));
    let file = work.join("import.json");
    std::fs::write(&file, import_file(&mut s, "cli import file", "priv-cli-import").to_string()).unwrap();
    outputs.push(("cli import".into(), run(&["import", file.to_str().unwrap()], None)));
    std::fs::remove_file(&file).unwrap();
    let stdin_import = import_file(&mut s, "cli import stdin", "priv-cli-stdin").to_string();
    outputs.push(("cli import -".into(), run(&["import", "-"], Some(&stdin_import))));
    outputs.push(("cli search".into(), run(&["search", "deploy", "staging", "--all-projects"], None)));
    outputs.push(("cli context".into(), run(&["context", "--all-projects"], None)));

    // ---- The WAL, before anything could checkpoint it away --------------------------------
    let wal_while_running = std::fs::read(data.join("cairn.db-wal")).unwrap_or_default();
    assert!(!wal_while_running.is_empty(), "the daemon's WAL should hold the recent writes");
    let export = run(&["export", "-"], None);
    assert!(serde_json::from_slice::<Value>(&export.stdout).is_ok(), "cairn export - prints the export");
    outputs.push(("cli export".into(), export));
    let vault = work.join("vault");
    let obsidian = run(&["export", "--obsidian", vault.to_str().unwrap()], None);
    assert!(obsidian.status.success(), "cairn export --obsidian: {}", String::from_utf8_lossy(&obsidian.stderr));
    outputs.push(("cli export --obsidian".into(), obsidian));

    // ---- Stop everything, then look everywhere ---------------------------------------------
    let status = mcp.finish();
    assert!(status.success(), "cairn mcp exited {status}");
    drop(daemon);

    let mut places: Vec<(String, Vec<u8>)> = vec![("the WAL while the daemon ran".into(), wal_while_running)];
    for path in files_under(&data) {
        places.push((format!("data dir file {}", path.display()), std::fs::read(&path).unwrap()));
    }
    for path in files_under(&vault) {
        places.push((format!("obsidian note {}", path.display()), std::fs::read(&path).unwrap()));
    }
    for path in files_under(&logs) {
        places.push((format!("log {}", path.display()), std::fs::read(&path).unwrap()));
    }
    for (what, out) in &outputs {
        places.push((format!("{what} stdout"), out.stdout.clone()));
        places.push((format!("{what} stderr"), out.stderr.clone()));
    }
    places.push(("HTTP and MCP answers".into(), answers.join("\n").into_bytes()));
    let db_bytes = std::fs::read(data.join("cairn.db")).unwrap();

    // Markers are "sec" + 20 and "pub" + 14 lowercase alphanumerics: one pass per place
    // collects every marker-shaped word in it.
    let found: Vec<(String, HashSet<String>)> =
        places.iter().map(|(place, bytes)| (place.clone(), words_after(bytes, b"sec", 20))).collect();
    let mut stored_publics = words_after(&db_bytes, b"pub", 14);
    for (place, bytes) in &places {
        if place.starts_with("the WAL") || place == "HTTP and MCP answers" || place.starts_with("cli ") {
            stored_publics.extend(words_after(bytes, b"pub", 14));
        }
    }
    let mut leaks = Vec::new();
    for (public, secret, door) in &s.fields {
        for (place, words) in &found {
            if words.contains(secret) {
                leaks.push(format!("{door}: {secret} found in {place}"));
            }
        }
        // The public half got through: it is stored (the file, the WAL, the export), or it was
        // read back from the store before an update replaced it.
        assert!(
            stored_publics.contains(public),
            "{door}: the public text {public} is not stored: the content did not get through"
        );
    }
    assert!(leaks.is_empty(), "private text leaked (seed {seed}):\n{}", leaks.join("\n"));
    // The debug logs were really on (so their silence about secrets means something).
    let daemon_log_text = std::fs::read_to_string(&daemon_log).unwrap();
    assert!(daemon_log_text.contains("DEBUG"), "the daemon logged nothing at debug level:\n{daemon_log_text}");
    assert!(std::fs::read_to_string(&mcp_log).unwrap().contains("DEBUG"), "cairn mcp logged nothing at debug level");
    eprintln!("privacy proof: {} private fields through HTTP, MCP and the CLI; none leaked", s.fields.len());
}

/// An export file whose every text field carries a secret.
fn import_file(s: &mut Secrets, door: &str, session: &str) -> Value {
    json!({
        "version": "0.1.0",
        "sessions": [{"id": session, "project": "privacy", "directory": s.field(&format!("{door} session directory")),
            "agent": s.field(&format!("{door} session agent")), "summary": s.field(&format!("{door} session summary"))}],
        "observations": [{"session_id": session, "project": "privacy", "type": "pattern",
            "title": s.field(&format!("{door} title")), "content": s.field(&format!("{door} content")),
            "topic_key": s.field(&format!("{door} topic_key")), "tool_name": s.field(&format!("{door} tool_name"))}],
        "prompts": [{"session_id": session, "project": "privacy", "content": s.field(&format!("{door} prompt"))}],
        "relations": [{"sync_id": format!("{session}-rel"), "source_id": "a", "target_id": "b", "relation": "related",
            "reason": s.field(&format!("{door} relation reason")), "evidence": s.field(&format!("{door} relation evidence")),
            "marked_by_actor": s.field(&format!("{door} relation actor")), "marked_by_model": s.field(&format!("{door} relation model"))}]
    })
}

fn structured_id(result: &Value) -> i64 {
    if let Some(id) = result["structuredContent"]["id"].as_i64() {
        return id;
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    value["id"].as_i64().unwrap_or_else(|| panic!("no id in {result}"))
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() { out.extend(files_under(&path)) } else { out.push(path) }
    }
    out
}

/// Every `prefix` followed by `len` lowercase alphanumerics in `bytes`.
fn words_after(bytes: &[u8], prefix: &[u8], len: usize) -> HashSet<String> {
    let word = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut out = HashSet::new();
    let mut i = 0;
    while i + prefix.len() + len <= bytes.len() {
        if &bytes[i..i + prefix.len()] == prefix {
            let tail = &bytes[i + prefix.len()..i + prefix.len() + len];
            if tail.iter().all(word) {
                out.insert(String::from_utf8_lossy(&bytes[i..i + prefix.len() + len]).into_owned());
            }
        }
        i += 1;
    }
    out
}

/// Secrets by pattern, through the CLI: saved with `CAIRN_REDACT_SECRETS=0` they are stored,
/// but `cairn export` is redacted of them; `cairn doctor` counts them without showing them;
/// `cairn privacy rewrite` erases them from the database file. A private tag in `--type` is
/// never stored.
#[test]
fn secrets_kept_by_the_setting_never_leave_and_a_rewrite_erases_them() {
    const KEY: &str = "AKIAQWERTYUIOPASDFGH";
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let run = |args: &[&str], env: &[(&str, &str)]| -> Output {
        let mut command = cairn();
        command.args(args).env("CAIRN_DATA_DIR", &data).env("CAIRN_DIRECT", "1");
        for (name, value) in env {
            command.env(name, value);
        }
        let out = command.output().unwrap();
        assert!(out.status.success() || args[0] == "doctor", "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let db_bytes = || {
        let mut bytes = std::fs::read(data.join("cairn.db")).unwrap();
        bytes.extend(std::fs::read(data.join("cairn.db-wal")).unwrap_or_default());
        bytes
    };
    let holds = |bytes: &[u8], needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    run(&["save", "--type", "a <private note=\"x\">typemarker</private>", "t", "b"], &[]);
    let default = run(&["--json", "save", "by default", &format!("key {KEY} here")], &[]);
    assert!(!String::from_utf8_lossy(&default.stdout).contains(KEY));
    run(&["save", "deploy", &format!("the key is {KEY}")], &[("CAIRN_REDACT_SECRETS", "0")]);
    assert!(holds(&db_bytes(), KEY), "kept as saved, the setting being off");
    assert!(!holds(&db_bytes(), "typemarker"));
    let export = run(&["export", "-"], &[]);
    let exported = String::from_utf8_lossy(&export.stdout);
    assert!(exported.contains("[REDACTED:aws-access-key]") && !exported.contains(KEY));
    let doctor: Value = serde_json::from_slice(&run(&["--json", "doctor"], &[]).stdout).unwrap();
    let check = doctor["checks"].as_array().unwrap().iter().find(|c| c["id"] == "privacy").unwrap().clone();
    assert_eq!(check["status"], "warning", "{check}");
    assert!(check["message"].as_str().unwrap().contains("1 memories (#3)") && !check.to_string().contains(KEY));
    let dry: Value = serde_json::from_slice(&run(&["--json", "privacy", "rewrite", "--dry-run"], &[]).stdout).unwrap();
    assert_eq!((dry["dry_run"].as_bool(), dry["found"]["memories"].as_u64()), (Some(true), Some(1)), "{dry}");
    assert!(holds(&db_bytes(), KEY), "a dry run changes nothing");
    let done: Value = serde_json::from_slice(&run(&["--json", "privacy", "rewrite"], &[]).stdout).unwrap();
    assert_eq!(done["vacuumed"], true, "{done}");
    assert!(!holds(&db_bytes(), KEY), "the secret is gone from the database file");
    let doctor: Value = serde_json::from_slice(&run(&["--json", "doctor"], &[]).stdout).unwrap();
    let check = doctor["checks"].as_array().unwrap().iter().find(|c| c["id"] == "privacy").unwrap().clone();
    assert_eq!(check["status"], "ok", "{check}");
}
