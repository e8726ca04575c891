//! The HTTP door: three routes, TLS or loopback-only plain HTTP. Handlers check the request
//! and call `store`; nothing here holds state between requests, so hubs scale side by side.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use cairn_wire::sync::{MAX_PULL_LIMIT, MAX_PUSH_BYTES, PushResponse};
use deadpool_postgres::Pool;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::error::{HubError, HubErrorCode};
use crate::store::AuditRow;
use crate::tokens::{Access, Caller};
use crate::{db, store, tokens, validate};

/// How `cairn hub serve` runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub database_url: String,
    pub listen: String,
    pub tls: Option<TlsFiles>,
}

/// The operator's certificate chain and private key, PEM.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A hub bound to its address, its schema up to date, not yet serving.
pub struct BoundHub {
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    router: Router,
}

#[derive(Clone)]
struct Hub {
    pool: Pool,
}

/// Check the config, reach the database, migrate, bind. Refusals come before any connection:
/// plain HTTP off loopback, half a TLS config, an unreadable certificate.
pub async fn bind(config: &ServeConfig) -> Result<BoundHub, HubError> {
    let addr = resolve(&config.listen).await?;
    let tls = match &config.tls {
        Some(files) => Some(tls_acceptor(files)?),
        None if addr.ip().is_loopback() => None,
        None => {
            return Err(HubError::new(
                HubErrorCode::PlainHttpNotLoopback,
                format!("{addr} is not a loopback address: give --tls-cert and --tls-key, or listen on 127.0.0.1"),
            ));
        }
    };
    let pool = db::pool(&config.database_url)?;
    db::migrate(&pool).await?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| HubError::new(HubErrorCode::ListenFailed, format!("cannot listen on {addr}: {e}")))?;
    Ok(BoundHub { listener, tls, router: router(pool) })
}

impl BoundHub {
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serve until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), HubError> {
        match self.tls {
            None => axum::serve(self.listener, self.router)
                .with_graceful_shutdown(shutdown)
                .await
                .map_err(|e| HubError::new(HubErrorCode::ListenFailed, format!("serving stopped: {e}"))),
            Some(acceptor) => {
                serve_tls(self.listener, acceptor, self.router, shutdown).await;
                Ok(())
            }
        }
    }
}

async fn resolve(listen: &str) -> Result<SocketAddr, HubError> {
    let mut addrs = tokio::net::lookup_host(listen).await.map_err(|e| {
        HubError::new(HubErrorCode::ListenFailed, format!("cannot resolve `{listen}` (want HOST:PORT): {e}"))
    })?;
    addrs.next().ok_or_else(|| HubError::new(HubErrorCode::ListenFailed, format!("`{listen}` resolves to no address")))
}

fn tls_acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, HubError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad =
        |what: &str, e: &dyn std::fmt::Display| HubError::new(HubErrorCode::TlsConfigInvalid, format!("{what}: {e}"));
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(std::iter::Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| bad(&format!("cannot read the certificate {}", files.cert.display()), &e))?;
    if certs.is_empty() {
        return Err(bad(&format!("{}", files.cert.display()), &"no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| bad(&format!("cannot read the private key {}", files.key.display()), &e))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("TLS setup", &e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("the certificate and key do not make a TLS config", &e))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A slow or silent client gets this long to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

async fn serve_tls(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let (tcp, _) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

fn router(pool: Pool) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/sync/mutations/push", post(push))
        .route("/sync/mutations/pull", get(pull))
        .fallback(|| async { HubError::new(HubErrorCode::NotFound, "no such route on the hub") })
        // The push handler reads the body itself, to answer an oversized one with 413 and a code.
        .layer(DefaultBodyLimit::disable())
        .with_state(Hub { pool })
}

/// 200 when PostgreSQL answers, else 503 `database_unavailable` (for load balancers).
async fn health(State(hub): State<Hub>) -> Response {
    match store::ping(&hub.pool).await {
        Ok(()) => Json(serde_json::json!({ "status": "ok", "service": "cairn-hub" })).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn push(State(hub): State<Hub>, headers: HeaderMap, body: Body) -> Response {
    let mut caller_id = None;
    let mut entry_count = 0;
    let outcome = async {
        let caller = tokens::authenticate(&hub.pool, authorization(&headers)).await?;
        caller_id = Some(caller.token_id);
        let bytes = read_limited(&headers, body).await?;
        let checked = validate::push_body(&bytes)?;
        entry_count = checked.received();
        if checked.valid.is_empty() {
            return Err(checked.refusal());
        }
        for e in &checked.valid {
            require_write(&caller, &e.project)?;
        }
        let rejected = checked.rejected();
        let created_by = checked.created_by.unwrap_or_else(|| caller.name.clone());
        let entries = checked.valid;
        let seqs = store::push(&hub.pool, &caller, &created_by, &entries, entry_count).await?;
        Ok::<_, HubError>(PushResponse {
            accepted_seqs: seqs,
            rejected,
            project: entries[0].project.clone(),
            project_source: "request_body".into(),
            project_path: String::new(),
        })
    }
    .await;
    match outcome {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => {
            let row = AuditRow {
                token_id: caller_id,
                action: "push",
                outcome: e.code.as_str(),
                http_status: e.code.http_status(),
                entries: entry_count,
                ..AuditRow::default()
            };
            store::audit(&hub.pool, row).await;
            e.into_response()
        }
    }
}

fn require_write(caller: &Caller, project: &str) -> Result<(), HubError> {
    match caller.access(project) {
        Some(Access::ReadWrite) => Ok(()),
        Some(Access::Read) => {
            Err(HubError::new(HubErrorCode::ReadOnlyGrant, format!("this token may only read project `{project}`")))
        }
        None => {
            Err(HubError::new(HubErrorCode::PolicyForbidden, format!("this token has no grant on project `{project}`")))
        }
    }
}

fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
}

/// A body past this size is not even read to its end: the connection is closed after the 413.
const DRAIN_LIMIT: usize = 4 * MAX_PUSH_BYTES;

/// The body, or 413 once it passes the push limit. A body somewhat over the limit is read to
/// its end and dropped, so the client, still sending, gets the 413 instead of a broken pipe;
/// one declared or found past `DRAIN_LIMIT` is refused at once. Never more than the limit is kept.
async fn read_limited(headers: &HeaderMap, body: Body) -> Result<axum::body::Bytes, HubError> {
    use http_body_util::BodyExt;
    let too_large =
        || HubError::new(HubErrorCode::PayloadTooLarge, format!("a push body is at most {MAX_PUSH_BYTES} bytes"));
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > DRAIN_LIMIT) {
        return Err(too_large());
    }
    let (mut body, mut kept, mut total) = (body, Vec::new(), 0usize);
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| HubError::new(HubErrorCode::MalformedBody, format!("cannot read the body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        total += data.len();
        if total > DRAIN_LIMIT {
            return Err(too_large());
        }
        if total <= MAX_PUSH_BYTES {
            kept.extend_from_slice(&data);
        }
    }
    if total > MAX_PUSH_BYTES { Err(too_large()) } else { Ok(kept.into()) }
}

#[derive(Debug, serde::Deserialize)]
struct PullParams {
    since_seq: Option<String>,
    limit: Option<String>,
    project: Option<String>,
}

async fn pull(
    State(hub): State<Hub>,
    headers: HeaderMap,
    params: Result<Query<PullParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let mut caller_id = None;
    let mut project_filter = None;
    let outcome = async {
        let caller = tokens::authenticate(&hub.pool, authorization(&headers)).await?;
        caller_id = Some(caller.token_id);
        let Query(params) =
            params.map_err(|e| HubError::new(HubErrorCode::InvalidQuery, format!("bad query string: {e}")))?;
        let since_seq = number(params.since_seq.as_deref(), "since_seq", 0)?;
        let limit = number(params.limit.as_deref(), "limit", MAX_PULL_LIMIT)?;
        if limit == 0 {
            return Err(HubError::new(HubErrorCode::InvalidQuery, "limit must be at least 1"));
        }
        let projects = match params.project.filter(|p| !p.trim().is_empty()) {
            Some(project) => {
                project_filter = Some(project.clone());
                if caller.access(&project).is_none() {
                    return Err(HubError::new(
                        HubErrorCode::PolicyForbidden,
                        format!("this token has no grant on project `{project}`"),
                    ));
                }
                vec![project]
            }
            None => caller.readable_projects(),
        };
        let mut answer = store::pull(&hub.pool, &projects, since_seq, limit.min(MAX_PULL_LIMIT)).await?;
        answer.project = project_filter.clone().unwrap_or_default();
        Ok::<_, HubError>(answer)
    }
    .await;
    let (code, status, count) = match &outcome {
        Ok(answer) => ("ok", 200, answer.mutations.len()),
        Err(e) => (e.code.as_str(), e.code.http_status(), 0),
    };
    let row = AuditRow {
        token_id: caller_id,
        action: "pull",
        project: project_filter.as_deref(),
        outcome: code,
        http_status: status,
        accepted: count,
        ..AuditRow::default()
    };
    store::audit(&hub.pool, row).await;
    match outcome {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => e.into_response(),
    }
}

/// A non-negative integer query parameter, or its default when absent.
fn number(value: Option<&str>, name: &str, default: i64) -> Result<i64, HubError> {
    match value {
        None | Some("") => Ok(default),
        Some(text) => text.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            HubError::new(HubErrorCode::InvalidQuery, format!("{name} must be a non-negative integer, not `{text}`"))
        }),
    }
}
