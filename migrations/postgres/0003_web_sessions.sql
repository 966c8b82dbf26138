-- Browser sessions: a cookie holds a random id; lab keeps only its digest.
CREATE TABLE web_sessions (
    id_hash    TEXT PRIMARY KEY NOT NULL,
    -- the token every form of this session must carry
    csrf       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
