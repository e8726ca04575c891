//! Bearer tokens: issued, listed, revoked, and checked on every request.
//!
//! A token is 256 random bits shown once; the database keeps only its sha256. A slow password
//! hash (argon2, bcrypt) protects guessable secrets; a 256-bit random token cannot be guessed
//! whatever the hash, so one fast sha256 per request is enough, and a lookup by that digest
//! reveals nothing through timing that helps anyone forge a token.

use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};

use crate::error::{HubError, HubErrorCode};

/// What a token issues: every printed token starts with it, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "chub_";

/// Read (pull) or read-write (pull and push), per project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    ReadWrite,
}

impl Access {
    fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read_write",
        }
    }

    fn parse(text: &str) -> Access {
        if text == "read_write" { Access::ReadWrite } else { Access::Read }
    }
}

/// What `cairn hub token create` asks for.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub name: String,
    pub projects: Vec<String>,
    pub access: Access,
    pub expires_in_secs: Option<i64>,
}

/// A token just made: the secret is here and nowhere else.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CreatedToken {
    pub id: i64,
    pub name: String,
    pub projects: Vec<String>,
    pub access: Access,
    pub expires_at: Option<String>,
    pub token: String,
}

/// One row of `cairn hub token list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    pub status: &'static str,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub grants: Vec<Grant>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    pub project: String,
    pub access: Access,
}

/// The token a request carried, with what it may touch.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token_id: i64,
    pub name: String,
    pub grants: Vec<Grant>,
}

impl Caller {
    pub fn access(&self, project: &str) -> Option<Access> {
        self.grants.iter().find(|g| g.project == project).map(|g| g.access)
    }

    pub fn readable_projects(&self) -> Vec<String> {
        self.grants.iter().map(|g| g.project.clone()).collect()
    }
}

/// RFC 3339 UTC with milliseconds, fixed width: the project's timestamp form.
pub(crate) const TS_SQL: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

fn digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

fn random_token() -> Result<String, HubError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| HubError::new(HubErrorCode::Internal, format!("no randomness for a token: {e}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{TOKEN_PREFIX}{hex}"))
}

/// Issue a token with its grants, in one transaction.
pub async fn create(pool: &Pool, request: &NewToken) -> Result<CreatedToken, HubError> {
    let projects: Vec<String> =
        request.projects.iter().map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect();
    if projects.is_empty() {
        return Err(HubError::new(HubErrorCode::InvalidTokenRequest, "a token needs at least one --project"));
    }
    let token = random_token()?;
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO hub_tokens (name, token_sha256, expires_at) \
                 VALUES ($1, $2, CASE WHEN $3::bigint IS NULL THEN NULL ELSE now() + make_interval(secs => $3::bigint) END) \
                 RETURNING id, to_char(expires_at AT TIME ZONE 'UTC', {TS_SQL})"
            ),
            &[&request.name, &digest(&token), &request.expires_in_secs],
        )
        .await?;
    let id: i64 = row.get(0);
    for project in &projects {
        tx.execute(
            "INSERT INTO hub_grants (token_id, project, access) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&id, project, &request.access.as_str()],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(CreatedToken { id, name: request.name.clone(), projects, access: request.access, expires_at: row.get(1), token })
}

/// Every token ever issued, oldest first, with its status (`active`, `revoked`, `expired`).
pub async fn list(pool: &Pool) -> Result<Vec<TokenInfo>, HubError> {
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
        .map(|row| {
            let status: String = row.get(2);
            let projects: Vec<String> = row.get(5);
            let accesses: Vec<String> = row.get(6);
            TokenInfo {
                id: row.get(0),
                name: row.get(1),
                status: match status.as_str() {
                    "revoked" => "revoked",
                    "expired" => "expired",
                    _ => "active",
                },
                created_at: row.get(3),
                expires_at: row.get(4),
                grants: projects
                    .into_iter()
                    .zip(accesses)
                    .map(|(project, access)| Grant { project, access: Access::parse(&access) })
                    .collect(),
            }
        })
        .collect())
}

/// Revoke a token: every request with it gets 401 from now on. Revoking twice is not an error.
pub async fn revoke(pool: &Pool, id: i64) -> Result<(), HubError> {
    let client = pool.get().await?;
    let found =
        client.execute("UPDATE hub_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1", &[&id]).await?;
    if found == 0 {
        return Err(HubError::new(HubErrorCode::TokenNotFound, format!("no token with id {id}")));
    }
    Ok(())
}

/// The caller behind an `Authorization` header value, or the 401 that refuses it.
pub async fn authenticate(pool: &Pool, header: Option<&str>) -> Result<Caller, HubError> {
    let token = header
        .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| HubError::new(HubErrorCode::AuthRequired, "send `Authorization: Bearer <token>`"))?;
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
    let Some(row) = client.query_opt(&statement, &[&digest(token)]).await? else {
        return Err(HubError::new(HubErrorCode::TokenUnknown, "this token is not known to the hub"));
    };
    if row.get::<_, bool>(2) {
        return Err(HubError::new(HubErrorCode::TokenRevoked, "this token was revoked"));
    }
    if row.get::<_, bool>(3) {
        return Err(HubError::new(HubErrorCode::TokenExpired, "this token has expired"));
    }
    let projects: Vec<String> = row.get(4);
    let accesses: Vec<String> = row.get(5);
    Ok(Caller {
        token_id: row.get(0),
        name: row.get(1),
        grants: projects
            .into_iter()
            .zip(accesses)
            .map(|(project, a)| Grant { project, access: Access::parse(&a) })
            .collect(),
    })
}

/// `30d`, `12h`, `90m`, `45s` or a bare number of seconds, as seconds.
pub fn parse_duration(text: &str) -> Result<i64, HubError> {
    let bad = || {
        HubError::new(
            HubErrorCode::InvalidTokenRequest,
            format!("`{text}` is not a duration like 30d, 12h, 90m or 45s"),
        )
    };
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let count: i64 = digits.parse().map_err(|_| bad())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    count.checked_mul(scale).filter(|secs| *secs > 0).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_by_unit_and_refuse_nonsense() {
        assert_eq!(parse_duration("30d").unwrap(), 30 * 86_400);
        assert_eq!(parse_duration("12h").unwrap(), 12 * 3600);
        assert_eq!(parse_duration("90").unwrap(), 90);
        for bad in ["", "0s", "5y", "h", "-3d", "99999999999999999999d"] {
            assert_eq!(parse_duration(bad).unwrap_err().code, HubErrorCode::InvalidTokenRequest, "{bad}");
        }
    }

    #[test]
    fn tokens_are_long_random_and_prefixed() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 64, "256 bits as hex");
    }
}
