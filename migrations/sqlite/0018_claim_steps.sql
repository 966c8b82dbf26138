-- What lab did for a claim, step by step (issue 28 §5): each round it
-- started and why, each check it ran and how it ended. lab writes these,
-- never the agent; a pull request's receipt is read from them.
CREATE TABLE claim_steps (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    claim_id  INTEGER NOT NULL REFERENCES afk_claims(id) ON DELETE CASCADE,
    at        INTEGER NOT NULL,
    -- The step as JSON (`domain::Step`): `{"round": …}` or `{"check": …}`.
    step      TEXT NOT NULL
);
CREATE INDEX claim_steps_by_claim ON claim_steps (claim_id, id);
