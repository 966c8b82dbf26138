-- Runs are sandboxed (ADR 12); where a machine cannot sandbox, the operator
-- may allow unsandboxed runs globally or per repo, and each run records
-- whether it ran in the sandbox.
ALTER TABLE global_settings ADD COLUMN allow_unsandboxed BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE repos ADD COLUMN allow_unsandboxed BOOLEAN;
ALTER TABLE runs ADD COLUMN sandboxed BOOLEAN NOT NULL DEFAULT FALSE;
