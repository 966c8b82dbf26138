-- Claims that still hold their issue (a live run, or an outcome not yet
-- told on the issue): what the claim transaction and every tick look up.
-- Claims told and done stay out of it, so neither cost grows with history.
CREATE INDEX afk_claims_blocking ON afk_claims (repo_id, issue_number)
    WHERE active OR (outcome IS NOT NULL AND NOT relabelled);

-- Outcomes not yet told, per node: what every settle looks up.
CREATE INDEX afk_claims_to_tell ON afk_claims (node)
    WHERE outcome IS NOT NULL AND NOT relabelled;

-- Live claims, per node: what every settle looks up first.
CREATE INDEX afk_claims_live ON afk_claims (node) WHERE active;
