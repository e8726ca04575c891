//! `cairn hub`: serve the team hub and manage its tokens. A thin door over `cairn-hub`.

use anyhow::Result;
use cairn_hub::tokens::{self, Access, CreatedToken, NewToken, TokenInfo};
use cairn_hub::{HubError, HubErrorCode, ServeConfig, TlsFiles};

use crate::cli::{GlobalArgs, HubAction, HubTokenAction};
use crate::output::{json, note, out};

pub fn run(action: HubAction, global: &GlobalArgs) -> Result<()> {
    let (as_json, projects) = (global.json, global.project.clone());
    crate::init_logging("info");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match action {
            HubAction::Serve { db, listen, tls_cert, tls_key } => {
                let tls = tls_cert.zip(tls_key).map(|(cert, key)| TlsFiles { cert, key });
                serve(ServeConfig { database_url: db.database_url, listen, tls }).await
            }
            HubAction::Token { action } => token(action, as_json, projects).await,
        }
    })
}

async fn serve(config: ServeConfig) -> Result<()> {
    let hub = cairn_hub::bind(&config).await?;
    let scheme = if hub.is_tls() { "https" } else { "http" };
    note(&format!("cairn hub: serving {scheme}://{}", hub.local_addr()));
    hub.run(shutdown_signal()).await?;
    Ok(())
}

/// Ctrl-C or SIGTERM: stop accepting, finish the requests in flight.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// `--project` is the CLI's global flag (one project, or several separated by commas).
async fn token(action: HubTokenAction, as_json: bool, projects: Option<String>) -> Result<()> {
    match action {
        HubTokenAction::Create { db, read_only, expires_in, name } => {
            let projects: Vec<String> = projects.as_deref().unwrap_or_default().split(',').map(str::to_owned).collect();
            let expires_in_secs = expires_in.as_deref().map(tokens::parse_duration).transpose()?;
            let access = if read_only { Access::Read } else { Access::ReadWrite };
            let pool = cairn_hub::db::pool(&db.database_url)?;
            cairn_hub::db::migrate(&pool).await?;
            let created = tokens::create(&pool, &NewToken { name, projects, access, expires_in_secs }).await?;
            if as_json { json(&created) } else { out(&render_created(&created)) }
        }
        HubTokenAction::List { db } => {
            let pool = cairn_hub::db::pool(&db.database_url)?;
            cairn_hub::db::migrate(&pool).await?;
            let all = tokens::list(&pool).await?;
            if as_json { json(&all) } else { out(&render_list(&all)) }
        }
        HubTokenAction::Revoke { db, id } => {
            let pool = cairn_hub::db::pool(&db.database_url)?;
            cairn_hub::db::migrate(&pool).await?;
            tokens::revoke(&pool, id).await?;
            if as_json {
                json(&serde_json::json!({ "id": id, "revoked": true }))
            } else {
                out(&format!("token {id} revoked"))
            }
        }
    }
}

fn access_label(access: Access) -> &'static str {
    match access {
        Access::Read => "read-only",
        Access::ReadWrite => "read-write",
    }
}

/// The token comes last, alone on its line, so `| tail -n1` captures it.
fn render_created(created: &CreatedToken) -> String {
    let expires = created.expires_at.as_deref().unwrap_or("never (until revoked)");
    format!(
        "token {} created{}\n  access:  {} on {}\n  expires: {expires}\nThe token is shown once; store it now:\n{}",
        created.id,
        if created.name.is_empty() { String::new() } else { format!(" ({})", created.name) },
        access_label(created.access),
        created.projects.join(", "),
        created.token
    )
}

fn render_list(all: &[TokenInfo]) -> String {
    if all.is_empty() {
        return "no tokens (cairn hub token create --project P)".into();
    }
    let mut lines = vec![format!("{:<5} {:<8} {:<16} {:<25} {}", "ID", "STATUS", "NAME", "EXPIRES", "GRANTS")];
    for t in all {
        let grants: Vec<String> =
            t.grants.iter().map(|g| format!("{} ({})", g.project, access_label(g.access))).collect();
        lines.push(format!(
            "{:<5} {:<8} {:<16} {:<25} {}",
            t.id,
            t.status,
            if t.name.is_empty() { "-" } else { &t.name },
            t.expires_at.as_deref().unwrap_or("never"),
            grants.join(", ")
        ));
    }
    lines.join("\n")
}

/// `report`'s view of a hub error: its stable code, and an exit code in the CLI's scheme
/// (3 invalid input, 4 not found, 6 store unavailable, 1 otherwise).
pub fn error_parts(err: &anyhow::Error) -> (&'static str, String, Option<String>, i32) {
    let Some(e) = err.downcast_ref::<HubError>() else { return ("internal", format!("{err:#}"), None, 1) };
    let exit = e.code.exit_code();
    let hint = match e.code {
        HubErrorCode::PlainHttpNotLoopback => {
            Some("plain HTTP is allowed on loopback only; use a TLS certificate for other addresses".into())
        }
        HubErrorCode::DatabaseUnavailable => {
            Some("check that PostgreSQL runs and that --database-url points at it".into())
        }
        _ => None,
    };
    (e.code.as_str(), e.message.clone(), hint, exit)
}
