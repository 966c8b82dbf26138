-- A usage limit's line is acted on once (issue 40 §4): the line lab typed
-- `continue` after, kept while it stays on the run's screen, so the same
-- line seen again (a second later, or by a restarted lab) is not a new
-- limit. The agent's bytes: shown on the run's page only.
ALTER TABLE runs ADD COLUMN limit_line TEXT;
