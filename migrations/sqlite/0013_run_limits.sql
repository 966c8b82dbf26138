-- Limits on every run (issue 23, ADR 24): a memory and a process cap per
-- run (NULL: no cap), a cap on each run's log, globally with per-repo
-- overrides (NULL inherits), and what each run got. And the keys of the
-- operator's CLI config that runs' own copies carry (a JSON list).
ALTER TABLE global_settings ADD COLUMN run_memory_max_mb BIGINT DEFAULT 8192;
ALTER TABLE global_settings ADD COLUMN run_pids_max BIGINT DEFAULT 4096;
ALTER TABLE global_settings ADD COLUMN run_log_max_mb BIGINT NOT NULL DEFAULT 64;
ALTER TABLE global_settings ADD COLUMN carry_cli_keys TEXT NOT NULL DEFAULT '[]';
ALTER TABLE repos ADD COLUMN memory_max_mb BIGINT;
ALTER TABLE repos ADD COLUMN pids_max BIGINT;
ALTER TABLE runs ADD COLUMN memory_max_mb BIGINT;
ALTER TABLE runs ADD COLUMN pids_max BIGINT;
