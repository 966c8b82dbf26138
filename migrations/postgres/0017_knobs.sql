-- Knobs (issue 27): per-issue directives, and their defaults per repo and
-- globally, each a JSON object of checked values by key ('{}': none set).
-- A repo may list the models its issues may ask for ('[]': its provider's
-- catalog), and keeps the last valid `.lab.toml` lab read from its default
-- branch (the commit, its contents as checked JSON, and the error of the
-- newest read when that one was refused). A run records the knobs it ran
-- with, each with where its value came from, and the budgets its issue
-- lowered (NULL: none).
ALTER TABLE global_settings ADD COLUMN knobs TEXT NOT NULL DEFAULT '{}';
ALTER TABLE repos ADD COLUMN knobs TEXT NOT NULL DEFAULT '{}';
ALTER TABLE repos ADD COLUMN allowed_models TEXT NOT NULL DEFAULT '[]';
ALTER TABLE repos ADD COLUMN config_commit TEXT;
ALTER TABLE repos ADD COLUMN config_file TEXT;
ALTER TABLE repos ADD COLUMN config_error TEXT;
ALTER TABLE issues ADD COLUMN knobs TEXT NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN knobs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN issue_budget TEXT;
