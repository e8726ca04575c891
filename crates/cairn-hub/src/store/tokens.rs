//! The SQL of tokens and their grants (`crate::tokens` holds the rules: what a token is, how
//! it is checked, what its status means). Rows come back as read; the rules build their types.

use deadpool_postgres::Pool;

use crate::error::HubError;

/// RFC 3339 UTC with milliseconds, fixed width: the project's timestamp form.
pub(crate) const TS_SQL: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

/// One token as listed: its status by the database's clock, and its grants as two parallel
/// arrays (projects, accesses), by project.
pub(crate) struct TokenRow {
    pub(crate) id: i64,
    pub(crate) name: String,
    /// `active`, `revoked` or `expired`.
    pub(crate) status: String,
    pub(crate) created_at: String,
    pub(crate) expires_at: Option<String>,
    pub(crate) projects: Vec<String>,
    pub(crate) accesses: Vec<String>,
}

/// The token a digest names, as a request is checked.
pub(crate) struct PresentedToken {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) revoked: bool,
    pub(crate) expired: bool,
    pub(crate) projects: Vec<String>,
    pub(crate) accesses: Vec<String>,
}

/// Store a token (by its digest) with one grant of `access` per project, in one transaction;
/// its id and expiry.
pub(crate) async fn insert_token(
    pool: &Pool,
    name: &str,
    digest: &[u8],
    expires_in_secs: Option<i64>,
    projects: &[String],
    access: &str,
) -> Result<(i64, Option<String>), HubError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO hub_tokens (name, token_sha256, expires_at) \
                 VALUES ($1, $2, CASE WHEN $3::bigint IS NULL THEN NULL ELSE now() + make_interval(secs => $3::bigint) END) \
                 RETURNING id, to_char(expires_at AT TIME ZONE 'UTC', {TS_SQL})"
            ),
            &[&name, &digest, &expires_in_secs],
        )
        .await?;
    let id: i64 = row.get(0);
    for project in projects {
        tx.execute(
            "INSERT INTO hub_grants (token_id, project, access) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&id, project, &access],
        )
        .await?;
    }
    tx.commit().await?;
    Ok((id, row.get(1)))
}

/// Every token ever issued, oldest first.
pub(crate) async fn token_rows(pool: &Pool) -> Result<Vec<TokenRow>, HubError> {
    let client = pool.get().await?;
    let rows = client
        .query(
            &format!(
                "SELECT t.id, t.name, \
                   CASE WHEN t.revoked_at IS NOT NULL THEN 'revoked' \
                        WHEN t.expires_at IS NOT NULL AND t.expires_at <= now() THEN 'expired' \
                        ELSE 'active' END, \
                   to_char(t.created_at AT TIME ZONE 'UTC', {TS_SQL}), \
                   to_char(t.expires_at AT TIME ZONE 'UTC', {TS_SQL}), \
                   COALESCE(array_agg(g.project ORDER BY g.project) FILTER (WHERE g.project IS NOT NULL), '{{}}'), \
                   COALESCE(array_agg(g.access ORDER BY g.project) FILTER (WHERE g.project IS NOT NULL), '{{}}') \
                 FROM hub_tokens t LEFT JOIN hub_grants g ON g.token_id = t.id \
                 GROUP BY t.id ORDER BY t.id"
            ),
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| TokenRow {
            id: row.get(0),
            name: row.get(1),
            status: row.get(2),
            created_at: row.get(3),
            expires_at: row.get(4),
            projects: row.get(5),
            accesses: row.get(6),
        })
        .collect())
}

/// Mark token `id` revoked (kept from the first time); how many tokens have that id.
pub(crate) async fn revoke_token(pool: &Pool, id: i64) -> Result<u64, HubError> {
    let client = pool.get().await?;
    Ok(client.execute("UPDATE hub_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1", &[&id]).await?)
}

/// The token whose sha256 is `digest`, with its grants.
pub(crate) async fn token_by_digest(pool: &Pool, digest: &[u8]) -> Result<Option<PresentedToken>, HubError> {
    let client = pool.get().await?;
    let statement = client
        .prepare_cached(
            "SELECT t.id, t.name, t.revoked_at IS NOT NULL, COALESCE(t.expires_at <= now(), false), \
               COALESCE(array_agg(g.project) FILTER (WHERE g.project IS NOT NULL), '{}'), \
               COALESCE(array_agg(g.access) FILTER (WHERE g.project IS NOT NULL), '{}') \
             FROM hub_tokens t LEFT JOIN hub_grants g ON g.token_id = t.id \
             WHERE t.token_sha256 = $1 GROUP BY t.id",
        )
        .await?;
    Ok(client.query_opt(&statement, &[&digest]).await?.map(|row| PresentedToken {
        id: row.get(0),
        name: row.get(1),
        revoked: row.get(2),
        expired: row.get(3),
        projects: row.get(4),
        accesses: row.get(5),
    }))
}
