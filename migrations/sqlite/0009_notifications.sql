-- Notifications (issue 13 §5, ADR 15): the operator's endpoints, and an
-- outbox of what each one is owed.
CREATE TABLE notify_endpoints (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    position   INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    -- The URL is the secret (a Slack hook's path, an ntfy topic): the API
    -- and the pages show it redacted.
    url        TEXT NOT NULL,
    token      TEXT,
    -- The events it wants, comma-separated in a fixed order ("waiting,ended").
    events     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- One row per notification owed: an endpoint, a run, an event and the state
-- change it comes from (`change_key`: when the run entered the state; 0 for
-- a pull request, which a run opens once). The unique key is the dedup: a
-- state change is never queued twice for one endpoint.
CREATE TABLE notify_outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id     INTEGER NOT NULL REFERENCES notify_endpoints(id) ON DELETE CASCADE,
    run_id          INTEGER NOT NULL,
    repo            TEXT NOT NULL,
    event           TEXT NOT NULL,
    state           TEXT NOT NULL,
    reason          TEXT,
    pull_request    TEXT,
    change_key      INTEGER NOT NULL,
    at              INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_until     INTEGER,
    delivered_at    INTEGER,
    given_up_at     INTEGER,
    last_error      TEXT,
    UNIQUE (endpoint_id, run_id, event, change_key)
);
CREATE INDEX notify_outbox_pending ON notify_outbox (endpoint_id, id)
    WHERE delivered_at IS NULL AND given_up_at IS NULL;

-- A run's state change queues its notifications in the same transaction as
-- the change itself: no code path that changes a state can forget it, and a
-- crash cannot lose one. With no endpoint subscribed it inserts nothing.
CREATE TRIGGER runs_notify AFTER UPDATE OF state ON runs
WHEN NEW.state <> OLD.state AND NEW.state IN ('waiting', 'exited', 'stopped', 'failed')
BEGIN
    INSERT OR IGNORE INTO notify_outbox
        (endpoint_id, run_id, repo, event, state, reason, change_key, at, next_attempt_at)
    SELECT e.id, NEW.id, NEW.repo_name, ev.event, NEW.state, NEW.state_reason, ev.at, ev.at, ev.at
    FROM notify_endpoints e,
         (SELECT CASE NEW.state WHEN 'waiting' THEN 'waiting' WHEN 'failed' THEN 'failed' ELSE 'ended' END AS event,
                 COALESCE(NEW.ended_at, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) AS at) ev
    WHERE ',' || e.events || ',' LIKE '%,' || ev.event || ',%';
END;
