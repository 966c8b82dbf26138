-- Issue 14: runs say which issue they are for; an issue's AFK attempts form
-- a lineage (attempt 1, 2, …) and each attempt counts its rounds on its pull
-- request; budgets bound what an AFK run may spend; a repo may run a check
-- command after each round.

-- The issue a run works on (NULL for a manual run started without one).
ALTER TABLE runs ADD COLUMN issue_number BIGINT;
ALTER TABLE runs ADD COLUMN issue_title TEXT;
ALTER TABLE runs ADD COLUMN issue_url TEXT;

-- Which attempt of its issue a claim is, how many rounds its run had, and,
-- for a failed attempt that will be tried again, from when.
ALTER TABLE afk_claims ADD COLUMN attempt BIGINT NOT NULL DEFAULT 1;
ALTER TABLE afk_claims ADD COLUMN rounds BIGINT NOT NULL DEFAULT 1;
ALTER TABLE afk_claims ADD COLUMN retry_at BIGINT;
-- The head and check a round was last started for (one round per distinct
-- failure), and what the pull request's checks said last.
ALTER TABLE afk_claims ADD COLUMN round_key TEXT;
ALTER TABLE afk_claims ADD COLUMN checks TEXT;

-- The global AFK limits of issue 14 (NULL budgets: no cap). Costs are kept
-- in billionths of a dollar, like run_usage.
ALTER TABLE global_settings ADD COLUMN afk_max_rounds BIGINT NOT NULL DEFAULT 3;
ALTER TABLE global_settings ADD COLUMN afk_max_attempts BIGINT NOT NULL DEFAULT 2;
ALTER TABLE global_settings ADD COLUMN afk_max_tokens BIGINT;
ALTER TABLE global_settings ADD COLUMN afk_max_cost_nano_usd BIGINT;
ALTER TABLE global_settings ADD COLUMN afk_memory_per_run_mb BIGINT NOT NULL DEFAULT 1024;

-- A repo's check command and its budget overrides (NULL: inherit).
ALTER TABLE repos ADD COLUMN check_command TEXT;
ALTER TABLE repos ADD COLUMN afk_max_tokens BIGINT;
ALTER TABLE repos ADD COLUMN afk_max_cost_nano_usd BIGINT;
ALTER TABLE repos ADD COLUMN afk_run_timeout_minutes BIGINT;

-- The outcomes' new spellings: an opened pull request is `pr-opened` (its
-- checks were not followed before), and every outcome is spelled with
-- hyphens, like the labels lab puts on issues.
UPDATE afk_claims SET outcome = 'pr-opened' WHERE outcome = 'succeeded';
UPDATE afk_claims SET outcome = 'timed-out' WHERE outcome = 'timed_out';
