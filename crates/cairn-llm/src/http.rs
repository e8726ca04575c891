//! What the remote providers share: one blocking HTTPS client (ureq, the system's trust store),
//! a time limit on every call, and one reading of an HTTP answer into the port's errors, so
//! OpenAI-compatible servers and Anthropic's API fail the same way for the caller's backoff.

use std::time::Duration;

use crate::LlmError;

/// Most bytes of an answer read: a chat answer is a few KiB; more is not an answer.
const ANSWER_LIMIT: u64 = 8 * 1024 * 1024;
/// Connecting may take this long whatever the call's limit: a dead host fails fast.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A status and the body that came with it.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: String,
}

/// One client with its time limit.
#[derive(Debug)]
pub(crate) struct Http {
    agent: ureq::Agent,
    timeout: Duration,
}

impl Http {
    pub fn new(timeout: Duration) -> Http {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .timeout_connect(Some(CONNECT_TIMEOUT.min(timeout)))
            // Statuses are read here, each into its kind of failure.
            .http_status_as_error(false)
            // A redirect would carry the key to wherever it points: the base URL must be the
            // API's own address.
            .max_redirects(0)
            .user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")))
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build())
            .build()
            .into();
        Http { agent, timeout }
    }

    pub fn timeout_secs(&self) -> u64 {
        self.timeout.as_secs().max(1)
    }

    pub fn post_json(&self, url: &str, headers: &[(&str, &str)], body: &serde_json::Value) -> Result<Answer, LlmError> {
        let mut request = self.agent.post(url).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let text = body.to_string();
        self.read(url, request.send(text.as_bytes()))
    }

    pub fn get(&self, url: &str, headers: &[(&str, &str)]) -> Result<Answer, LlmError> {
        let mut request = self.agent.get(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.read(url, request.call())
    }

    fn read(&self, url: &str, sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Answer, LlmError> {
        let mut response = sent.map_err(|e| self.transport_error(url, e))?;
        let status = response.status().as_u16();
        let body = response.body_mut().with_config().limit(ANSWER_LIMIT).read_to_string().map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => {
                LlmError::Malformed(format!("{url} answered more than {ANSWER_LIMIT} bytes"))
            }
            other => self.transport_error(url, other),
        })?;
        Ok(Answer { status, body })
    }

    /// A call that got no complete answer: too slow, or nobody there.
    fn transport_error(&self, url: &str, error: ureq::Error) -> LlmError {
        match error {
            ureq::Error::Timeout(_) | ureq::Error::BodyStalled => LlmError::Timeout(self.timeout_secs()),
            ureq::Error::Io(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                LlmError::Timeout(self.timeout_secs())
            }
            other => LlmError::Unavailable(format!("{url}: {other}")),
        }
    }
}

/// A non-2xx answer as the port's failure: the server's own words (its `error.message` when it
/// sends JSON) and who has to act. 401/403: the key (the user); 404: the model or the base URL
/// (the user); 408, 409, 429, 5xx and Anthropic's 529 "overloaded": later (backoff); any other
/// 4xx: this request is refused.
pub(crate) fn status_error(url: &str, answer: &Answer, key_env: Option<&str>) -> LlmError {
    let said = server_message(&answer.body);
    let status = answer.status;
    match status {
        401 | 403 => LlmError::NotConfigured(match key_env {
            Some(var) => format!("{url} refused the key in {var} ({status}: {said}): set {var} to a valid key"),
            None => format!("{url} wants a key ({status}: {said}): name its variable with --api-key-env"),
        }),
        404 => LlmError::NotConfigured(format!(
            "{url} answered 404 ({said}): check the base URL and that the model exists there"
        )),
        300..=399 => LlmError::NotConfigured(format!(
            "{url} redirects ({status}): set the base URL to the address it redirects to"
        )),
        408 | 409 | 425 | 429 | 500..=599 => LlmError::Unavailable(format!("{url} answered {status}: {said}")),
        _ => LlmError::Refused(format!("{url} answered {status}: {said}")),
    }
}

/// The error message of an API's JSON error body (`{"error":{"message":…}}` for OpenAI and
/// Anthropic, `{"error":"…"}` for Ollama), else the body's start.
fn server_message(body: &str) -> String {
    let value: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = value.as_ref().and_then(|v| {
        let error = v.get("error")?;
        error.get("message").and_then(|m| m.as_str()).or_else(|| error.as_str()).map(str::to_owned)
    });
    let text = message.unwrap_or_else(|| body.trim().to_owned());
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    if short.is_empty() { "no body".to_owned() } else { short }
}

/// Whether a base URL points at this machine, where a server (Ollama, llama.cpp, LM Studio)
/// usually wants no key.
pub(crate) fn is_loopback_url(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else { return false };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_who_has_to_act() {
        let answer = |status, body: &str| Answer { status, body: body.to_owned() };
        let key = Some("OPENAI_API_KEY");
        let e = status_error("u", &answer(401, r#"{"error":{"message":"bad key"}}"#), key);
        assert!(
            matches!(&e, LlmError::NotConfigured(m) if m.contains("OPENAI_API_KEY") && m.contains("bad key")),
            "{e}"
        );
        assert!(!e.retryable());
        for status in [429, 500, 503, 529] {
            assert!(status_error("u", &answer(status, ""), key).retryable(), "{status}");
        }
        assert!(
            matches!(status_error("u", &answer(400, r#"{"error":"nope"}"#), key), LlmError::Refused(m) if m.contains("nope"))
        );
        assert!(matches!(status_error("u", &answer(404, ""), key), LlmError::NotConfigured(_)));
    }

    #[test]
    fn loopback_urls() {
        for url in ["http://localhost:11434/v1", "http://127.0.0.1:8080", "http://[::1]:1234/v1", "https://LOCALHOST"] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in ["https://api.openai.com/v1", "http://192.168.1.5:11434/v1", "localhost"] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
