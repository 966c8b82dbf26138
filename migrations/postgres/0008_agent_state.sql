-- What the agent is doing, as its CLI's own hooks report it (ADR 13):
-- working, waiting (with the question) or idle, and since when. NULL until
-- known. `agent_by` says who set it (`hook`, or `screen` for the fallback
-- screen check), so the screen check never undoes what a hook reported.
ALTER TABLE runs ADD COLUMN agent_state TEXT;
ALTER TABLE runs ADD COLUMN agent_reason TEXT;
ALTER TABLE runs ADD COLUMN agent_since BIGINT;
ALTER TABLE runs ADD COLUMN agent_by TEXT;
