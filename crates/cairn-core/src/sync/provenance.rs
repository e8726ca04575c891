//! Where a memory a model wrote came from, as it travels with the memory: an observation
//! payload carries a `provenance` object (migration `0015_sync_provenance.sql` adds it on the way
//! out) when the memory has a `memory_provenance` row, and applying the payload writes that row
//! in the same transaction as the memory.
//!
//! A payload without the object comes from a peer that has no row for the memory, or from one
//! too old (or engram) to know of provenance. Such a version keeps the local row only while the
//! memory's text is the same (a pin, a bumped count, the same version again): once a teammate's
//! edit changed the text, it is no longer what the model wrote, and showing it as extracted
//! (cited messages that no longer back it, counted by `extraction_status`) would misstate whose
//! words it is. A peer that still holds a row for an edited memory sends it, and that is kept.

use rusqlite::Connection;
use serde::Deserialize;
use serde_json::Value;

use crate::error::Result;
use crate::store::extraction::{self, ProvenanceRow};

/// The `provenance` object of an observation payload: ids and names only, no conversation text.
/// Fields a newer cairn adds are ignored, as in the rest of the payload.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct CarriedProvenance {
    /// `fact`, `summary` or `brief` (a newer origin is kept as it came).
    origin: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    message_ids: Vec<String>,
    provider: String,
    model: String,
    #[serde(default)]
    created_at: Option<String>,
}

/// The provenance a payload carries (`None`: it carries none); why it is malformed otherwise.
pub(super) fn carried(payload: &Value) -> std::result::Result<Option<CarriedProvenance>, String> {
    match payload.get("provenance") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            let p = CarriedProvenance::deserialize(value).map_err(|e| format!("provenance: {e}"))?;
            if p.origin.trim().is_empty() {
                return Err("provenance: origin is empty".to_owned());
            }
            Ok(Some(p))
        }
    }
}

/// Before a newer version overwrites memory `id`: a version whose text differs and that carries
/// no provenance was not written by a model (see the module's rule), so the row goes first and
/// the journal entry of the overwrite carries none either.
pub(super) fn drop_if_rewritten(
    tx: &Connection,
    id: i64,
    carried: Option<&CarriedProvenance>,
    same_text: bool,
) -> Result<()> {
    if carried.is_none() && !same_text {
        extraction::delete_provenance(tx, id)?;
    }
    Ok(())
}

/// After memory `id` took a version (or already had it): write the provenance it carried,
/// unless the row says the same already (an unchanged row is no write, so nothing is journaled
/// again). Whether it wrote.
pub(super) fn record(tx: &Connection, id: i64, carried: Option<&CarriedProvenance>, now: &str) -> Result<bool> {
    let Some(p) = carried else { return Ok(false) };
    let row = ProvenanceRow {
        observation_id: id,
        origin: p.origin.trim().to_owned(),
        session_id: p.session_id.clone().filter(|s| !s.trim().is_empty()),
        message_ids: serde_json::to_string(&p.message_ids)?,
        provider: p.provider.clone(),
        model: p.model.clone(),
        created_at: p.created_at.as_deref().and_then(crate::clock::normalize_ts).unwrap_or_else(|| now.to_owned()),
    };
    if extraction::provenance_in(tx, id)?.as_ref() == Some(&row) {
        return Ok(false);
    }
    extraction::replace_provenance(tx, &row)?;
    Ok(true)
}
