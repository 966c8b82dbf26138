-- Lost runs (issue 14 §3, ADR 17): a run whose tmux session vanished with
-- no exit recorded is `lost` and can be resumed. `resumes` counts how often
-- it was (AFK runs are resumed automatically once).
ALTER TABLE runs ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;

-- A run that becomes lost is worth one notification, under the `failed`
-- event (its state says `lost`).
DROP TRIGGER runs_notify;
CREATE TRIGGER runs_notify AFTER UPDATE OF state ON runs
WHEN NEW.state <> OLD.state AND NEW.state IN ('waiting', 'exited', 'stopped', 'failed', 'lost')
BEGIN
    INSERT OR IGNORE INTO notify_outbox
        (endpoint_id, run_id, repo, event, state, reason, change_key, at, next_attempt_at)
    SELECT e.id, NEW.id, NEW.repo_name, ev.event, NEW.state, NEW.state_reason, ev.at, ev.at, ev.at
    FROM notify_endpoints e,
         (SELECT CASE NEW.state WHEN 'waiting' THEN 'waiting' WHEN 'failed' THEN 'failed' WHEN 'lost' THEN 'failed' ELSE 'ended' END AS event,
                 COALESCE(NEW.ended_at, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) AS at) ev
    WHERE ',' || e.events || ',' LIKE '%,' || ev.event || ',%';
END;
