//! The hub's refusal codes: the `error_code` of every error body it answers (docs/HUB.md,
//! "Errors"), and what `cairn hub` commands report. Clients match on them: add new ones, never
//! rename one.

crate::error_table! {
    /// Every failure the hub answers or a `cairn hub` command reports.
    pub enum HubErrorCode;
    // code => name, HTTP status, exit code of a `cairn hub` command
    /// No `Authorization: Bearer` header.
    AuthRequired => "auth_required", 401, 1;
    /// A bearer token the hub never issued.
    TokenUnknown => "token_unknown", 401, 1;
    /// A revoked token.
    TokenRevoked => "token_revoked", 401, 1;
    /// A token past its expiry.
    TokenExpired => "token_expired", 401, 1;
    /// The token has no grant on a project of the request (engram's code for it).
    PolicyForbidden => "policy_forbidden", 403, 1;
    /// A push to a project the token may only read.
    ReadOnlyGrant => "read_only_grant", 403, 1;
    /// A push of more entries than the hub takes at once.
    TooManyEntries => "too_many_entries", 413, 1;
    /// A push body over the byte limit.
    PayloadTooLarge => "payload_too_large", 413, 1;
    /// A body that is not the JSON the route takes.
    MalformedBody => "malformed_body", 400, 3;
    /// A push without entries.
    EmptyEntries => "empty_entries", 400, 3;
    /// An entry without a project (engram's code for it).
    EmptyProject => "empty_project", 400, 3;
    /// An entry field missing, empty, too long or of the wrong type.
    InvalidEntry => "invalid_entry", 400, 3;
    /// A relation entry whose payload lacks a required field (engram's code for it).
    ValidationError => "validation_error", 400, 3;
    /// A NUL character (U+0000) in an entry's text or payload, or in `created_by`: PostgreSQL
    /// stores none, in text or JSONB.
    NulCharacter => "nul_character", 400, 3;
    /// A `mutation_id` that is empty or blank, longer than 512 characters, or holds a control
    /// character.
    InvalidMutationId => "invalid_mutation_id", 400, 3;
    /// A pull query parameter that is not what the route takes.
    InvalidQuery => "invalid_query", 400, 3;
    /// No route here.
    NotFound => "not_found", 404, 1;
    /// PostgreSQL cannot be reached or is restarting: back off and retry.
    DatabaseUnavailable => "database_unavailable", 503, 6;
    /// Anything else the hub did not expect.
    Internal => "internal_error", 500, 1;
    /// `cairn hub serve` on a non-loopback address without TLS.
    PlainHttpNotLoopback => "plain_http_not_loopback", 400, 3;
    /// A TLS certificate or key that cannot be read or used, or only one of the two.
    TlsConfigInvalid => "tls_config_invalid", 400, 3;
    /// The listen address cannot be resolved or bound.
    ListenFailed => "listen_failed", 500, 1;
    /// A database URL that does not parse.
    InvalidDatabaseUrl => "invalid_database_url", 400, 3;
    /// `cairn hub token` arguments that make no token (no project, a bad duration).
    InvalidTokenRequest => "invalid_token_request", 400, 3;
    /// `cairn hub token revoke` of an id that does not exist.
    TokenNotFound => "token_not_found", 404, 4;
}

impl HubErrorCode {
    /// engram's `error_class`: `policy` (auth and grants), `invalid_request` (the client must
    /// change the request), `transient` (retry later), `internal`.
    pub fn class(self) -> &'static str {
        match self.http_status() {
            401 | 403 => "policy",
            503 => "transient",
            500 => "internal",
            _ => "invalid_request",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HubErrorCode;

    #[test]
    fn codes_are_unique_snake_case_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for &code in HubErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate code {}", code.as_str());
            assert!(code.as_str().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert_eq!(HubErrorCode::from_name(code.as_str()), Some(code));
        }
        assert_eq!(HubErrorCode::from_name("internal"), None);
    }

    /// Every code with its status, class and exit code: a code, status or class that changes
    /// changes what clients (engram's too) see, so it shows here first.
    #[test]
    fn every_code_with_its_status_class_and_exit() {
        let listing: String = HubErrorCode::ALL
            .iter()
            .map(|c| format!("{} {} {} {}\n", c.as_str(), c.http_status(), c.class(), c.exit_code()))
            .collect();
        insta::assert_snapshot!(listing);
    }
}
