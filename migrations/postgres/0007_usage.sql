-- The agent CLI's own session id for the run: chosen by lab for Claude Code
-- (--session-id), read from the run's rollout for Codex.
ALTER TABLE runs ADD COLUMN cli_session_id TEXT;

-- What a run's agent used, read from its CLI's transcript: where the
-- transcript is, how far it was read (whole lines only), the running totals
-- and what the reader keeps between passes (`carry`). No foreign key: the
-- AFK ledger counts the cost of a run after the run is removed.
CREATE TABLE run_usage (
    run_id                BIGINT PRIMARY KEY,
    transcript            TEXT,
    read_offset           BIGINT NOT NULL DEFAULT 0,
    carry                 TEXT NOT NULL DEFAULT '{}',
    input_tokens          BIGINT NOT NULL DEFAULT 0,
    output_tokens         BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens     BIGINT NOT NULL DEFAULT 0,
    cache_creation_tokens BIGINT NOT NULL DEFAULT 0,
    turns                 BIGINT NOT NULL DEFAULT 0,
    -- the cost in billionths of a dollar; NULL once a model without a price was seen
    cost_nano_usd         BIGINT,
    -- true once the run ended and its transcript was read a last time
    done                  BOOLEAN NOT NULL DEFAULT FALSE
);
