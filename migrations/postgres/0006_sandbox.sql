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
