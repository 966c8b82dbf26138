-- The review phase (issue 28 §3): the claim's review run while one judges
-- its pull request, and every verdict a review run submitted.
ALTER TABLE afk_claims ADD COLUMN review_run_id INTEGER;
CREATE TABLE reviews (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id      INTEGER NOT NULL REFERENCES repos(id) ON DELETE CASCADE,
    issue_number INTEGER NOT NULL,
    claim_id     INTEGER NOT NULL REFERENCES afk_claims(id) ON DELETE CASCADE,
    run_id       INTEGER NOT NULL,
    round        INTEGER NOT NULL,
    head         TEXT NOT NULL,
    -- approved | changes_requested (domain::Verdict)
    verdict      TEXT NOT NULL,
    summary      TEXT NOT NULL,
    -- a JSON array of domain::Finding
    findings     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    UNIQUE (run_id)
);
CREATE INDEX reviews_by_claim ON reviews (claim_id, id);
CREATE INDEX reviews_by_issue ON reviews (repo_id, issue_number, id);
