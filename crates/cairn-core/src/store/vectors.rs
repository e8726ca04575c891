//! Stored vectors as semantic search reads them: every vector of a model (the in-memory index
//! is built from them), a sample (the centre of its binary codes) and chosen memories' (the
//! exact re-score of a shortlist). Vectors stay f32 in the table; only memory holds codes.

use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::Result;

/// Vectors read to find the centre of the binary codes: the per-dimension mean settles long
/// before this many.
pub(crate) const CENTRE_SAMPLE: i64 = 4_096;

/// Every stored vector of `model` (f32 little-endian bytes), in id order.
pub(crate) fn each_vector(conn: &Connection, model: &str, mut each: impl FnMut(i64, &[u8])) -> Result<()> {
    let mut stmt = conn.prepare("SELECT observation_id, vector FROM embeddings WHERE model = ?1")?;
    let mut rows = stmt.query([model])?;
    while let Some(row) = rows.next()? {
        each(row.get(0)?, blob(row, 1)?);
    }
    Ok(())
}

/// About [`CENTRE_SAMPLE`] vectors of `model` spread over the ids (the first at or after each
/// of as many evenly spaced ids, so old and new memories both count): one seek each, where a
/// filter on the id (`observation_id % n = 0`) read the whole table (16.7 s of a cold 1M
/// store's 6 GB at load 9).
pub(crate) fn sample_vectors(conn: &Connection, model: &str, mut each: impl FnMut(&[u8])) -> Result<()> {
    let max_id: Option<i64> =
        conn.query_row("SELECT max(observation_id) FROM embeddings", [], |r| r.get(0)).optional()?.flatten();
    let Some(max_id) = max_id else { return Ok(()) };
    let stride = (max_id / CENTRE_SAMPLE).max(1);
    let mut stmt = conn.prepare(
        "SELECT observation_id, vector FROM embeddings WHERE observation_id >= ?1 AND model = ?2
         ORDER BY observation_id LIMIT 1",
    )?;
    let mut last = None;
    let mut from = 0;
    while from <= max_id {
        let mut rows = stmt.query(params![from, model])?;
        if let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            if last != Some(id) {
                each(blob(row, 1)?);
                last = Some(id);
            }
        }
        from += stride;
    }
    Ok(())
}

/// The stored vectors of `model` for `ids` (ids without one are skipped).
pub(crate) fn vectors_of(conn: &Connection, model: &str, ids: &[i64], mut each: impl FnMut(i64, &[u8])) -> Result<()> {
    let mut stmt = conn.prepare_cached("SELECT vector FROM embeddings WHERE observation_id = ?1 AND model = ?2")?;
    for &id in ids {
        let mut rows = stmt.query(params![id, model])?;
        if let Some(row) = rows.next()? {
            each(id, blob(row, 0)?);
        }
    }
    Ok(())
}

/// Column `i` of a row as the bytes of a blob, without a copy.
fn blob<'a>(row: &'a Row<'_>, i: usize) -> rusqlite::Result<&'a [u8]> {
    row.get_ref(i)?.as_blob().map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, Type::Blob, Box::new(e)))
}
