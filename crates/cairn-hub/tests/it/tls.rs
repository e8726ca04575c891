//! TLS with the operator's certificate, and plain HTTP only on loopback.

use std::sync::Arc;

use cairn_hub::tokens::Access;
use cairn_hub::{HubErrorCode, ServeConfig, TlsFiles};
use serde_json::json;

use crate::support::*;

#[test]
fn plain_http_off_loopback_is_refused_before_touching_the_database() {
    for listen in ["0.0.0.0:0", "192.0.2.1:7000"] {
        let config =
            ServeConfig { database_url: "postgres://nobody@127.0.0.1:1/none".into(), listen: listen.into(), tls: None };
        let err = block_on(cairn_hub::bind(&config)).err().expect("refused");
        assert_eq!(err.code, HubErrorCode::PlainHttpNotLoopback, "{listen}: {err}");
    }
}

#[test]
fn unusable_tls_files_are_refused_with_a_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let config = ServeConfig {
        database_url: "postgres://nobody@127.0.0.1:1/none".into(),
        listen: "0.0.0.0:0".into(),
        tls: Some(TlsFiles { cert: dir.path().join("empty.pem"), key: dir.path().join("missing.pem") }),
    };
    let err = block_on(cairn_hub::bind(&config)).err().expect("refused");
    assert_eq!(err.code, HubErrorCode::TlsConfigInvalid, "{err}");
}

#[test]
fn tls_with_a_self_signed_certificate_serves_push_and_pull() {
    let (_pg, url) = database!();
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    std::fs::write(dir.path().join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let hub = InProcessHub::start_with(ServeConfig {
        database_url: url.clone(),
        listen: "127.0.0.1:0".into(),
        tls: Some(TlsFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") }),
    });
    let roots =
        ureq::tls::RootCerts::Specific(Arc::new(vec![ureq::tls::Certificate::from_der(cert.cert.der()).to_owned()]));
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
        .build()
        .new_agent();
    let client =
        HubClient { base: format!("https://{}", hub.addr), token: token(&url, &["alpha"], Access::ReadWrite), agent };
    let (status, body) = client.push(&json!({ "entries": [entry("alpha", "k", "m1")] }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(client.pull_all().len(), 1);
    // The same port does not speak plain HTTP.
    assert!(agent_plain_fails(&format!("http://{}/health", hub.addr)));
}

fn agent_plain_fails(url: &str) -> bool {
    agent().get(url).call().is_err()
}
