//! An OpenAI-compatible `/embeddings` client: OpenAI, Ollama (`http://localhost:11434/v1`),
//! LM Studio (`http://localhost:1234/v1`), vLLM, llama.cpp's server. Vectors are normalised
//! here, so every embedder hands back unit vectors; a change of length is an error, not a
//! silently broken index.

use std::sync::OnceLock;
use std::time::Duration;

use crate::{EmbedError, Embedder, normalise};

/// Most texts sent in one request (endpoints cap batch sizes; 64 is safe for all of them).
const MAX_BATCH: usize = 64;

#[derive(Debug)]
pub struct HttpEmbedder {
    url: String,
    model: String,
    key: Option<String>,
    id: String,
    dims: OnceLock<usize>,
    agent: ureq::Agent,
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
        .build()
        .into()
}

impl HttpEmbedder {
    /// `base_url` is the API root (`…/v1`); `/embeddings` is appended. `dims`, when known,
    /// is enforced from the first answer on.
    pub fn new(base_url: &str, model: &str, key: Option<String>, dims: Option<usize>, timeout: Duration) -> Self {
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
            agent: agent(timeout),
        }
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = serde_json::json!({ "model": self.model, "input": texts });
        let mut request = self.agent.post(&self.url);
        if let Some(key) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let mut response =
            request.send_json(&body).map_err(|e| EmbedError::Endpoint(format!("POST {}: {e}", self.url)))?;
        let parsed: Response = response.body_mut().with_config().limit(256 * 1024 * 1024).read_json().map_err(|e| {
            EmbedError::Endpoint(format!("{} answered with something other than embeddings: {e}", self.url))
        })?;
        if parsed.data.len() != texts.len() {
            return Err(EmbedError::Endpoint(format!(
                "{} returned {} embeddings for {} texts",
                self.url,
                parsed.data.len(),
                texts.len()
            )));
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
            .collect()
    }
}

impl Embedder for HttpEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(MAX_BATCH) {
            out.extend(self.request(batch)?);
        }
        Ok(out)
    }
}
