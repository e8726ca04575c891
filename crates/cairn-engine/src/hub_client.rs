//! The hub's HTTP client: engram cloud's mutation protocol (`POST /sync/mutations/push`,
//! `GET /sync/mutations/pull`) over HTTPS with the system's trust store (or plain HTTP to a
//! loopback hub), a bearer token, and a time limit on every request.

use std::time::Duration;

use cairn_core::sync::remote::{HubFailure, HubTransport, PullResponse, PushRequest, PushResponse};

/// One request, connect to last byte: a push of 8 MiB on a slow link fits.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Most bytes of an answer read (a pull page is at most 100 mutations).
const ANSWER_LIMIT: u64 = 64 * 1024 * 1024;

/// A hub at `url`, reached with `token`.
#[derive(Debug)]
pub struct HubClient {
    url: String,
    token: String,
    #[cfg(feature = "remote")]
    agent: ureq::Agent,
}

impl HubClient {
    pub fn new(url: &str, token: &str) -> HubClient {
        HubClient {
            url: url.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            #[cfg(feature = "remote")]
            agent: agent(),
        }
    }
}

#[cfg(feature = "remote")]
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .timeout_connect(Some(Duration::from_secs(5)))
        .http_status_as_error(false)
        .user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")))
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build())
        .build()
        .into()
}

#[cfg(feature = "remote")]
impl HubTransport for HubClient {
    fn push(&self, body: &PushRequest) -> Result<PushResponse, HubFailure> {
        let request = self
            .agent
            .post(format!("{}/sync/mutations/push", self.url))
            .header("Authorization", &format!("Bearer {}", self.token));
        let (status, text) = read_text(request.send_json(body).map_err(unanswered)?)?;
        // A push none of whose entries the hub could store is refused whole, each entry listed:
        // the round parks them like the refusals of a push that stored the others.
        if (400..500).contains(&status)
            && let Some(rejected) = rejected_entries(&text)
        {
            return Ok(PushResponse { rejected, ..PushResponse::default() });
        }
        parse_answer(status, &text)
    }

    fn pull(&self, since: i64, limit: usize, project: Option<&str>) -> Result<PullResponse, HubFailure> {
        let mut request = self
            .agent
            .get(format!("{}/sync/mutations/pull", self.url))
            .query("since_seq", since.to_string())
            .query("limit", limit.to_string())
            .header("Authorization", &format!("Bearer {}", self.token));
        if let Some(project) = project {
            request = request.query("project", project);
        }
        let (status, text) = read_text(request.call().map_err(unanswered)?)?;
        parse_answer(status, &text)
    }
}

/// A request that got no HTTP answer: the hub may or may not have committed a push.
#[cfg(feature = "remote")]
fn unanswered(error: ureq::Error) -> HubFailure {
    HubFailure::Unavailable(error.to_string())
}

/// An answer's status and body.
#[cfg(feature = "remote")]
fn read_text(mut answer: ureq::http::Response<ureq::Body>) -> Result<(u16, String), HubFailure> {
    let status = answer.status().as_u16();
    let text = answer
        .body_mut()
        .with_config()
        .limit(ANSWER_LIMIT)
        .read_to_string()
        .map_err(|e| HubFailure::Unavailable(format!("answer cut: {e}")))?;
    Ok((status, text))
}

/// The entries a refusal lists in `rejected`, if it lists any.
#[cfg(feature = "remote")]
fn rejected_entries(text: &str) -> Option<Vec<cairn_core::sync::remote::RejectedEntry>> {
    #[derive(serde::Deserialize)]
    struct Refusal {
        #[serde(default)]
        rejected: Vec<cairn_core::sync::remote::RejectedEntry>,
    }
    serde_json::from_str::<Refusal>(text).ok().map(|r| r.rejected).filter(|r| !r.is_empty())
}

/// A 2xx body as `T`; a 5xx as unavailable; a 4xx as refused with the hub's code.
#[cfg(feature = "remote")]
fn parse_answer<T: serde::de::DeserializeOwned>(status: u16, text: &str) -> Result<T, HubFailure> {
    match status {
        200..=299 => serde_json::from_str(text).map_err(|e| HubFailure::Invalid(format!("{status} answer: {e}"))),
        500..=599 => Err(HubFailure::Unavailable(format!("{status}: {}", error_field(text, "error")))),
        _ => Err(HubFailure::Refused {
            status,
            code: error_field(text, "error_code"),
            message: error_field(text, "error"),
        }),
    }
}

#[cfg(feature = "remote")]
fn error_field(text: &str, field: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get(field).and_then(|f| f.as_str()).map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(200).collect())
}

/// Without the `remote` feature there is no TLS client: every request fails the same way.
#[cfg(not(feature = "remote"))]
impl HubTransport for HubClient {
    fn push(&self, _body: &PushRequest) -> Result<PushResponse, HubFailure> {
        Err(not_built(&self.url, &self.token))
    }

    fn pull(&self, _since: i64, _limit: usize, _project: Option<&str>) -> Result<PullResponse, HubFailure> {
        Err(not_built(&self.url, &self.token))
    }
}

#[cfg(not(feature = "remote"))]
fn not_built(url: &str, _token: &str) -> HubFailure {
    let _ = (REQUEST_TIMEOUT, ANSWER_LIMIT);
    HubFailure::Unavailable(format!("this cairn was built without the `remote` feature: it cannot reach {url}"))
}
