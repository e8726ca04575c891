-- Journal entries a hub will not take, kept with the reason instead of blocking the entries
-- after them: refused by the hub one by one (its code), or never sent because no hub could
-- store them (a NUL character, which PostgreSQL refuses; an entry larger than one push). The
-- target's mark moves past them; they are never retried. An entry of the same row that reaches
-- the hub later forgets them.
CREATE TABLE sync_parked (
    target_key  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    project     TEXT NOT NULL,
    entity      TEXT NOT NULL,
    entity_key  TEXT NOT NULL,
    code        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    refused_by  TEXT NOT NULL,
    parked_at   TEXT NOT NULL,
    PRIMARY KEY (target_key, seq)
) WITHOUT ROWID;

CREATE INDEX sync_parked_row ON sync_parked (target_key, entity_key);
