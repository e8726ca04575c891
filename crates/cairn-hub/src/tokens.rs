//! Bearer tokens: issued, listed, revoked, and checked on every request.
//!
//! A token is 256 random bits shown once; the database keeps only its sha256. A slow password
//! hash (argon2, bcrypt) protects guessable secrets; a 256-bit random token cannot be guessed
//! whatever the hash, so one fast sha256 per request is enough, and a lookup by that digest
//! reveals nothing through timing that helps anyone forge a token.

use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};

use crate::error::{HubError, HubErrorCode};
use crate::store::tokens as rows;

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
    let (id, expires_at) = rows::insert_token(
        pool,
        &request.name,
        &digest(&token),
        request.expires_in_secs,
        &projects,
        request.access.as_str(),
    )
    .await?;
    Ok(CreatedToken { id, name: request.name.clone(), projects, access: request.access, expires_at, token })
}

/// Every token ever issued, oldest first, with its status (`active`, `revoked`, `expired`).
pub async fn list(pool: &Pool) -> Result<Vec<TokenInfo>, HubError> {
    Ok(rows::token_rows(pool)
        .await?
        .into_iter()
        .map(|row| TokenInfo {
            id: row.id,
            name: row.name,
            status: match row.status.as_str() {
                "revoked" => "revoked",
                "expired" => "expired",
                _ => "active",
            },
            created_at: row.created_at,
            expires_at: row.expires_at,
            grants: grants(row.projects, &row.accesses),
        })
        .collect())
}

/// Grants from the parallel arrays the database aggregates.
fn grants(projects: Vec<String>, accesses: &[String]) -> Vec<Grant> {
    projects
        .into_iter()
        .zip(accesses)
        .map(|(project, access)| Grant { project, access: Access::parse(access) })
        .collect()
}

/// Revoke a token: every request with it gets 401 from now on. Revoking twice is not an error.
pub async fn revoke(pool: &Pool, id: i64) -> Result<(), HubError> {
    if rows::revoke_token(pool, id).await? == 0 {
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
    let Some(row) = rows::token_by_digest(pool, &digest(token)).await? else {
        return Err(HubError::new(HubErrorCode::TokenUnknown, "this token is not known to the hub"));
    };
    if row.revoked {
        return Err(HubError::new(HubErrorCode::TokenRevoked, "this token was revoked"));
    }
    if row.expired {
        return Err(HubError::new(HubErrorCode::TokenExpired, "this token has expired"));
    }
    Ok(Caller { token_id: row.id, name: row.name, grants: grants(row.projects, &row.accesses) })
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
