//! `cairn hub` (the `hub` feature): token commands' output, and serve's refusals and start,
//! against a throwaway PostgreSQL cluster.

use std::net::SocketAddr;
use std::process::Output;
use std::time::{Duration, Instant};

use cairn_pgtest::PgCluster;

use crate::support::{cairn, http};

fn hub(url: &str, args: &[&str]) -> Output {
    cairn().arg("hub").args(args).env("CAIRN_HUB_DATABASE_URL", url).output().expect("run cairn hub")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "cairn hub failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Tokens and timestamps change every run.
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (r"chub_[0-9a-f]{64}", "[TOKEN]"),
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "[TIME]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

#[test]
fn token_create_list_and_revoke() {
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.create_database("hub");

    let created = stdout(&hub(&url, &["token", "create", "--project", "alpha,beta", "--name", "alice-laptop"]));
    let token = created.lines().last().unwrap();
    assert!(token.starts_with("chub_") && token.len() == 69, "the token is the last line: {created}");
    snapshot!("hub_token_create", created);
    let read_only =
        stdout(&hub(&url, &["token", "create", "--project", "alpha", "--read-only", "--expires-in", "30d"]));
    snapshot!("hub_token_create_read_only", read_only);

    snapshot!("hub_token_revoke", stdout(&hub(&url, &["token", "revoke", "1"])));
    snapshot!("hub_token_list", stdout(&hub(&url, &["token", "list"])));

    let missing = hub(&url, &["token", "revoke", "99"]);
    assert_eq!(missing.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("error[token_not_found]"));
    for bad in [&["token", "create", "--project", "alpha", "--expires-in", "soon"][..], &["token", "create"][..]] {
        let out = hub(&url, bad);
        assert_eq!(out.status.code(), Some(3), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("error[invalid_token_request]"), "{bad:?}");
    }
}

#[test]
fn serve_refuses_plain_http_off_loopback_and_serves_on_loopback() {
    let refused = hub("postgres://nobody@127.0.0.1:1/none", &["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(refused.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("error[plain_http_not_loopback]"), "{refused:?}");

    let Some(pg) = PgCluster::start() else { return };
    let url = pg.create_database("hub");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = cairn()
        .args(["hub", "serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("CAIRN_HUB_DATABASE_URL", &url)
        .spawn()
        .expect("start cairn hub serve");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (status, body) = loop {
        let answer = http(addr, "GET", "/health", None);
        if answer.0 != 0 || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((status, body["service"].as_str()), (200, Some("cairn-hub")), "{body}");
}
