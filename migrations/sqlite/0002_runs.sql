-- One row per run: one life of an agent CLI in one tmux session.
CREATE TABLE runs (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                 TEXT NOT NULL,
    repo_id              INTEGER REFERENCES repos(id) ON DELETE SET NULL,
    repo_name            TEXT NOT NULL,
    provider             TEXT NOT NULL,
    model                TEXT NOT NULL,
    model_source         TEXT NOT NULL,
    effort               TEXT NOT NULL,
    effort_source        TEXT NOT NULL,
    options              TEXT NOT NULL DEFAULT '{}',
    prompt               TEXT NOT NULL DEFAULT '',
    state                TEXT NOT NULL,
    state_reason         TEXT,
    node                 TEXT NOT NULL,
    session              TEXT NOT NULL,
    workspace            TEXT,
    branch               TEXT,
    log_path             TEXT,
    pid                  INTEGER,
    -- the pid's start time (clock ticks after boot): pid and start identify the process
    pid_start            INTEGER,
    exit_status          INTEGER,
    exit_signal          INTEGER,
    token_hash           TEXT,
    created_at           INTEGER NOT NULL,
    started_at           INTEGER,
    ended_at             INTEGER,
    workspace_removed_at INTEGER
);
CREATE INDEX runs_node_state ON runs (node, state);
CREATE INDEX runs_repo ON runs (repo_id);
CREATE UNIQUE INDEX runs_token_hash ON runs (token_hash);

-- Hours after a run ends that its workspace is kept; NULL keeps it.
ALTER TABLE global_settings ADD COLUMN workspace_retention_hours INTEGER;
