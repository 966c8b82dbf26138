-- Where a repo's AFK work comes from, and pausing.
ALTER TABLE repos ADD COLUMN issue_source TEXT NOT NULL DEFAULT 'builtin';
ALTER TABLE repos ADD COLUMN forge_url TEXT;
ALTER TABLE repos ADD COLUMN forge_repo TEXT;
ALTER TABLE repos ADD COLUMN forge_token TEXT;
ALTER TABLE repos ADD COLUMN afk_paused BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE global_settings ADD COLUMN afk_paused BOOLEAN NOT NULL DEFAULT FALSE;

-- The built-in tracker.
CREATE TABLE issues (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id    INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    number     INTEGER NOT NULL,
    title      TEXT NOT NULL,
    body       TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL DEFAULT 'open',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (repo_id, number)
);
CREATE TABLE issue_labels (
    issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    label    TEXT NOT NULL,
    PRIMARY KEY (issue_id, label)
);
CREATE INDEX issue_labels_label ON issue_labels (label);
CREATE TABLE issue_comments (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id   INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    author     TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE pulls (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id      INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    number       INTEGER NOT NULL,
    title        TEXT NOT NULL,
    body         TEXT NOT NULL DEFAULT '',
    head_branch  TEXT NOT NULL,
    base_branch  TEXT NOT NULL,
    issue_number INTEGER,
    run_id       INTEGER,
    url          TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'open',
    created_at   INTEGER NOT NULL,
    UNIQUE (repo_id, number)
);

-- AFK claims: one row per AFK run of an issue. While the run is live,
-- active = TRUE, and at most one active claim per issue can exist, whatever
-- the number of lab nodes: the partial unique index is the backstop.
CREATE TABLE afk_claims (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id      INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    repo_name    TEXT NOT NULL,
    issue_number INTEGER NOT NULL,
    run_id       INTEGER,
    node         TEXT NOT NULL,
    active       BOOLEAN NOT NULL DEFAULT TRUE,
    model        TEXT,
    effort       TEXT,
    pr_url       TEXT,
    outcome      TEXT,
    detail       TEXT,
    relabelled   BOOLEAN NOT NULL DEFAULT FALSE,
    claimed_at   INTEGER NOT NULL,
    started_at   INTEGER,
    ended_at     INTEGER
);
CREATE UNIQUE INDEX afk_claims_one_active ON afk_claims (repo_id, issue_number) WHERE active;
CREATE INDEX afk_claims_run ON afk_claims (run_id);
