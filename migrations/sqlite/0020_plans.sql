-- The plan phase (issue 28 §2): where a claim stands, its planning run,
-- how many times its plan was sent back, and each version of an issue's
-- plan with its decision.
ALTER TABLE afk_claims ADD COLUMN stage TEXT NOT NULL DEFAULT 'work';
ALTER TABLE afk_claims ADD COLUMN plan_run_id INTEGER;
ALTER TABLE afk_claims ADD COLUMN plan_rounds INTEGER NOT NULL DEFAULT 0;
CREATE TABLE plans (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id      INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    issue_number INTEGER NOT NULL,
    claim_id     INTEGER NOT NULL REFERENCES afk_claims(id) ON DELETE CASCADE,
    run_id       INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    body         TEXT NOT NULL,
    -- proposed | approved | rejected | superseded (domain::PlanState)
    state        TEXT NOT NULL,
    decided_by   TEXT,
    reason       TEXT,
    created_at   INTEGER NOT NULL,
    decided_at   INTEGER,
    UNIQUE (repo_id, issue_number, version)
);
CREATE INDEX plans_by_claim ON plans (claim_id, version);
