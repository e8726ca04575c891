//! Tokens and grants: who may pull and push what, and that a refusal writes nothing.

use cairn_hub::tokens::Access;
use serde_json::json;

use crate::support::*;

fn refused(client: &HubClient, url: &str, expected_status: u16, expected_code: &str) {
    let before = mutation_count(url);
    let (status, body) = client.push(&json!({ "entries": [entry("alpha", "k", "m-refused")] }));
    assert_eq!((status, body["error_code"].as_str()), (expected_status, Some(expected_code)), "push: {body}");
    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(mutation_count(url), before, "a refused push writes nothing");
    let (status, body) = client.pull("since_seq=0");
    if expected_status == 401 {
        assert_eq!((status, body["error_code"].as_str()), (401, Some(expected_code)), "pull: {body}");
        assert_eq!(body["error_class"], "policy");
    }
}

#[test]
fn unknown_missing_revoked_and_expired_tokens_get_401() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let (id, good) = token_full(&url, &["alpha"], Access::ReadWrite);
    let client = HubClient::new(&hub.base(), &good);
    assert_eq!(client.push(&json!({ "entries": [entry("alpha", "k", "m0")] })).0, 200);

    refused(&HubClient::new(&hub.base(), "chub_not-a-token"), &url, 401, "token_unknown");
    refused(&HubClient::new(&hub.base(), ""), &url, 401, "auth_required");

    block_on(async {
        let pool = cairn_hub::db::pool(&url).unwrap();
        cairn_hub::tokens::revoke(&pool, id).await.unwrap();
        cairn_hub::tokens::revoke(&pool, id).await.expect("revoking twice is fine");
        let missing = cairn_hub::tokens::revoke(&pool, 9999).await.unwrap_err();
        assert_eq!(missing.code, cairn_hub::HubErrorCode::TokenNotFound);
    });
    refused(&client, &url, 401, "token_revoked");

    let (expiring_id, expiring) = token_full(&url, &["alpha"], Access::ReadWrite);
    sql_exec(&url, &format!("UPDATE hub_tokens SET expires_at = now() - interval '1 second' WHERE id = {expiring_id}"));
    refused(&HubClient::new(&hub.base(), &expiring), &url, 401, "token_expired");
}

#[test]
fn grants_decide_projects_and_read_only_cannot_push() {
    let (_pg, url) = database!();
    let hub = InProcessHub::start(&url);
    let writer = HubClient::new(&hub.base(), &token(&url, &["alpha", "beta"], Access::ReadWrite));
    assert_eq!(writer.push(&json!({ "entries": [entry("alpha", "a", "m1"), entry("beta", "b", "m2")] })).0, 200);

    let beta_only = HubClient::new(&hub.base(), &token(&url, &["beta"], Access::ReadWrite));
    refused(&beta_only, &url, 403, "policy_forbidden");
    // One entry of an ungranted project refuses the whole push.
    let before = mutation_count(&url);
    let (status, body) = beta_only.push(&json!({ "entries": [entry("beta", "b2", "m3"), entry("alpha", "a2", "m4")] }));
    assert_eq!((status, body["error_code"].as_str()), (403, Some("policy_forbidden")));
    assert_eq!(mutation_count(&url), before);
    // Pull shows only granted projects; asking for another one is refused.
    let pulled: Vec<_> = beta_only.pull_all().iter().map(|m| m["project"].as_str().unwrap().to_owned()).collect();
    assert_eq!(pulled, ["beta"]);
    let (status, body) = beta_only.pull("since_seq=0&project=alpha");
    assert_eq!((status, body["error_code"].as_str()), (403, Some("policy_forbidden")));

    let reader = HubClient::new(&hub.base(), &token(&url, &["alpha"], Access::Read));
    refused(&reader, &url, 403, "read_only_grant");
    assert_eq!(reader.pull_all().len(), 1, "a read-only token pulls");

    // Every push, pull and refusal is in the audit log.
    let refusals =
        sql_i64(&url, "SELECT count(*) FROM hub_audit_log WHERE outcome IN ('policy_forbidden', 'read_only_grant')");
    assert!(refusals >= 4, "{refusals} refusals audited");
    assert!(
        sql_i64(
            &url,
            "SELECT count(*) FROM hub_audit_log WHERE action = 'push' AND outcome = 'ok' AND accepted_count = 2"
        ) == 1
    );
    assert!(sql_i64(&url, "SELECT count(*) FROM hub_audit_log WHERE action = 'pull' AND outcome = 'ok'") >= 2);
}
