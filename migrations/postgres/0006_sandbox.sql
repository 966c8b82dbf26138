-- Runs are sandboxed (ADR 12); where a machine cannot sandbox, the operator
-- may allow unsandboxed runs globally or per repo, and each run records
-- whether it ran in the sandbox.
ALTER TABLE global_settings ADD COLUMN allow_unsandboxed BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE repos ADD COLUMN allow_unsandboxed BOOLEAN;
ALTER TABLE runs ADD COLUMN sandboxed BOOLEAN NOT NULL DEFAULT FALSE;

-- When an outcome went on its issue: a node whose listing of ready issues
-- began before that may hold a stale list, and must not claim the issue
-- again from it.
ALTER TABLE afk_claims ADD COLUMN relabelled_at BIGINT;

-- Why lab stopped a run (operator, time_limit, pull_request), so how it
-- ended is read from a field, not from the words of its reason.
ALTER TABLE runs ADD COLUMN stop_cause TEXT;
