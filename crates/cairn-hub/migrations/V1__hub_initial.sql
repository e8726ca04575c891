-- The hub's tables. One database serves one team; every hub process on it is stateless.

-- Every accepted mutation, in the order pullers see it. `seq` is handed out under the push
-- lock (see store.rs), so a higher seq never becomes visible before a lower one.
CREATE TABLE hub_mutations (
    seq          BIGSERIAL PRIMARY KEY,
    project      TEXT        NOT NULL,
    entity       TEXT        NOT NULL,
    entity_key   TEXT        NOT NULL,
    op           TEXT        NOT NULL,
    payload      JSONB       NOT NULL,
    occurred_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_by   TEXT        NOT NULL DEFAULT '',
    token_id     BIGINT,
    -- The client's idempotency key: a retried push returns the seq stored the first time.
    mutation_id  TEXT
);
CREATE UNIQUE INDEX hub_mutations_mutation_id ON hub_mutations (project, mutation_id)
    WHERE mutation_id IS NOT NULL;
CREATE INDEX hub_mutations_project_seq ON hub_mutations (project, seq);

-- Bearer tokens, stored as the sha256 of the token (never the token itself).
CREATE TABLE hub_tokens (
    id            BIGSERIAL PRIMARY KEY,
    name          TEXT        NOT NULL DEFAULT '',
    token_sha256  BYTEA       NOT NULL UNIQUE,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ,
    revoked_at    TIMESTAMPTZ
);

-- What a token may do, per project: read (pull) or read_write (pull and push).
CREATE TABLE hub_grants (
    token_id  BIGINT NOT NULL REFERENCES hub_tokens (id) ON DELETE CASCADE,
    project   TEXT   NOT NULL,
    access    TEXT   NOT NULL CHECK (access IN ('read', 'read_write')),
    PRIMARY KEY (token_id, project)
);

-- Every push, pull and refusal: who, which project, what came of it.
CREATE TABLE hub_audit_log (
    id              BIGSERIAL PRIMARY KEY,
    occurred_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    token_id        BIGINT,
    action          TEXT        NOT NULL,
    project         TEXT,
    outcome         TEXT        NOT NULL,
    http_status     INTEGER     NOT NULL,
    entry_count     INTEGER     NOT NULL DEFAULT 0,
    accepted_count  INTEGER     NOT NULL DEFAULT 0
);
CREATE INDEX hub_audit_log_occurred_at ON hub_audit_log (occurred_at);
