//! An OpenAI-compatible `/embeddings` client: OpenAI, Ollama (`http://localhost:11434/v1`),
//! LM Studio (`http://localhost:1234/v1`), vLLM, llama.cpp's server. Vectors are normalised
//! here, so every embedder hands back unit vectors; a change of length is an error, not a
//! silently broken index.
//!
//! A slow local endpoint (Ollama or a small server on CPU) may time out, or refuse, a batch of
//! long texts that it would embed in smaller pieces; so a batch that fails with a timeout, a
//! dropped connection or a 408/413/429/5xx is retried in halves, down to single texts. A
//! server that is down, a wrong answer or a single text that still fails ends the call.

use std::sync::OnceLock;
use std::time::Duration;

use crate::{EmbedError, Embedder, normalise};

/// How much one request may ask of the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// The whole request, connect to last byte.
    pub timeout: Duration,
    /// Most texts sent in one request.
    pub batch_size: usize,
}

impl Default for HttpLimits {
    /// Endpoints cap batch sizes; 64 is safe for all of them.
    fn default() -> Self {
        HttpLimits { timeout: Duration::from_secs(15), batch_size: 64 }
    }
}

#[derive(Debug)]
pub struct HttpEmbedder {
    url: String,
    model: String,
    key: Option<String>,
    id: String,
    dims: OnceLock<usize>,
    agent: ureq::Agent,
    batch_size: usize,
}

/// Why one request failed, and whether a smaller one may succeed.
enum Failure {
    /// Too big or too slow for the endpoint: try the halves.
    Retry(EmbedError),
    /// The endpoint is down or answered wrongly: smaller batches will not help.
    Fatal(EmbedError),
}

impl Failure {
    fn into_error(self) -> EmbedError {
        match self {
            Failure::Retry(e) | Failure::Fatal(e) => e,
        }
    }
}

/// Whether a failed POST may work with fewer texts.
fn worth_splitting(error: &ureq::Error) -> bool {
    match error {
        ureq::Error::Timeout(_) | ureq::Error::BodyStalled => true,
        ureq::Error::StatusCode(code) => matches!(code, 408 | 413 | 429 | 500..=599),
        // A dropped connection mid-request (a server killed by an oversized batch); a refused
        // one means nothing listens.
        ureq::Error::Io(e) => e.kind() != std::io::ErrorKind::ConnectionRefused,
        _ => false,
    }
}

#[derive(serde::Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(serde::Deserialize)]
struct Item {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(Duration::from_secs(5)))
        .user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")))
        // The system's certificates, not a bundled list: behind a proxy or a company CA that
        // the machine trusts, downloads and HTTPS endpoints work as they do for curl.
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build())
        .build()
        .into()
}

impl HttpEmbedder {
    /// `base_url` is the API root (`…/v1`); `/embeddings` is appended. `dims`, when known,
    /// is enforced from the first answer on.
    pub fn new(base_url: &str, model: &str, key: Option<String>, dims: Option<usize>, limits: HttpLimits) -> Self {
        let dims_cell = OnceLock::new();
        if let Some(d) = dims {
            let _ = dims_cell.set(d);
        }
        HttpEmbedder {
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            id: format!("http:{model}"),
            model: model.to_owned(),
            key,
            dims: dims_cell,
            agent: agent(limits.timeout),
            batch_size: limits.batch_size.max(1),
        }
    }

    /// Vectors of `texts` in one request, or in halves (recursively) when the endpoint cannot
    /// take them all at once.
    fn embed_splitting(&self, texts: &[&str], out: &mut Vec<Vec<f32>>) -> Result<(), EmbedError> {
        match self.request(texts) {
            Ok(vectors) => {
                out.extend(vectors);
                Ok(())
            }
            Err(Failure::Retry(e)) if texts.len() > 1 => {
                tracing::warn!(texts = texts.len(), error = %e, "embedding batch failed; retrying it in halves");
                let (first, second) = texts.split_at(texts.len() / 2);
                self.embed_splitting(first, out)?;
                self.embed_splitting(second, out)
            }
            Err(failure) => Err(failure.into_error()),
        }
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Failure> {
        let body = serde_json::json!({ "model": self.model, "input": texts });
        let mut request = self.agent.post(&self.url);
        if let Some(key) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response = request.send_json(&body).map_err(|e| {
            let error = EmbedError::Endpoint(format!("POST {} ({} texts): {e}", self.url, texts.len()));
            if worth_splitting(&e) { Failure::Retry(error) } else { Failure::Fatal(error) }
        })?;
        let parsed: Response = response.body_mut().with_config().limit(256 * 1024 * 1024).read_json().map_err(|e| {
            let error =
                EmbedError::Endpoint(format!("{} answered with something other than embeddings: {e}", self.url));
            if worth_splitting(&e) { Failure::Retry(error) } else { Failure::Fatal(error) }
        })?;
        if parsed.data.len() != texts.len() {
            return Err(Failure::Fatal(EmbedError::Endpoint(format!(
                "{} returned {} embeddings for {} texts",
                self.url,
                parsed.data.len(),
                texts.len()
            ))));
        }
        let mut items = parsed.data;
        if items.iter().all(|i| i.index.is_some()) {
            items.sort_by_key(|i| i.index);
        }
        items
            .into_iter()
            .map(|item| {
                let mut v = item.embedding;
                let expected = *self.dims.get_or_init(|| v.len());
                if v.len() != expected || v.is_empty() {
                    return Err(EmbedError::Dimension { expected, got: v.len() });
                }
                if v.iter().any(|x| !x.is_finite()) {
                    return Err(EmbedError::Endpoint(format!("{} returned a vector with NaN or infinity", self.url)));
                }
                normalise(&mut v);
                Ok(v)
            })
            .collect::<Result<_, _>>()
            .map_err(Failure::Fatal)
    }
}

impl Embedder for HttpEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            self.embed_splitting(batch, &mut out)?;
        }
        Ok(out)
    }
}
