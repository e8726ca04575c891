//! The answer to `search`: hits that carry their own relation notes. Its JSON (the `/v1/op`
//! and MCP router answer) keeps the shape it always had, bare hits plus an `annotations` map
//! by sync id, which is derived from the hits here and read back into them.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize, Serializer};

use crate::search::deep::DeepReport;
use crate::search::{AnnotatedHit, SearchHit, SearchMode};

/// Search results, each hit with its relation notes.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "SearchResponseIn")]
pub struct SearchResponse {
    pub hits: Vec<AnnotatedHit>,
    pub notices: Vec<String>,
    /// The ranking used (lexical, semantic, hybrid).
    pub mode: Option<SearchMode>,
    /// What deep recall did, when it was asked for (`deep`).
    pub deep: Option<DeepReport>,
}

/// The JSON as it is sent: the hits bare, their notes in a map by sync id (only hits with
/// notes have an entry).
#[derive(Serialize)]
struct SearchResponseOut<'a> {
    hits: Vec<&'a SearchHit>,
    notices: &'a [String],
    annotations: BTreeMap<&'a str, &'a [String]>,
    mode: Option<SearchMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deep: Option<&'a DeepReport>,
}

impl Serialize for SearchResponse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        SearchResponseOut {
            hits: self.hits.iter().map(|h| &h.hit).collect(),
            notices: &self.notices,
            annotations: self
                .hits
                .iter()
                .filter(|h| !h.annotations.is_empty())
                .map(|h| (h.hit.observation.sync_id.as_str(), h.annotations.as_slice()))
                .collect(),
            mode: self.mode,
            deep: self.deep.as_ref(),
        }
        .serialize(serializer)
    }
}

/// The JSON as it is read (a daemon's answer), before the notes go back onto their hits.
#[derive(Deserialize)]
struct SearchResponseIn {
    hits: Vec<SearchHit>,
    notices: Vec<String>,
    annotations: HashMap<String, Vec<String>>,
    #[serde(default)]
    mode: Option<SearchMode>,
    #[serde(default)]
    deep: Option<DeepReport>,
}

impl From<SearchResponseIn> for SearchResponse {
    fn from(wire: SearchResponseIn) -> SearchResponse {
        let SearchResponseIn { hits, notices, mut annotations, mode, deep } = wire;
        let hits = hits
            .into_iter()
            .map(|hit| AnnotatedHit {
                annotations: annotations.remove(&hit.observation.sync_id).unwrap_or_default(),
                hit,
            })
            .collect();
        SearchResponse { hits, notices, mode, deep }
    }
}
