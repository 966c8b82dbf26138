-- A built-in pull request's merge: the default branch's commit it made, the
-- commits it was made from (the diff stays readable after the branch is
-- deleted), and when.
ALTER TABLE pulls ADD COLUMN merged_sha TEXT;
ALTER TABLE pulls ADD COLUMN merged_base TEXT;
ALTER TABLE pulls ADD COLUMN merged_head TEXT;
ALTER TABLE pulls ADD COLUMN merged_at INTEGER;
