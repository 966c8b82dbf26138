-- Lost runs (issue 14 §3, ADR 17): a run whose tmux session vanished with
-- no exit recorded is `lost` and can be resumed. `resumes` counts how often
-- it was (AFK runs are resumed automatically once).
ALTER TABLE runs ADD COLUMN resumes BIGINT NOT NULL DEFAULT 0;

-- A run that becomes lost is worth one notification, under the `failed`
-- event (its state says `lost`).
CREATE OR REPLACE FUNCTION runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_event TEXT := CASE NEW.state WHEN 'waiting' THEN 'waiting' WHEN 'failed' THEN 'failed' WHEN 'lost' THEN 'failed' ELSE 'ended' END;
    v_at BIGINT := COALESCE(NEW.ended_at, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT);
BEGIN
    INSERT INTO notify_outbox
        (endpoint_id, run_id, repo, event, state, reason, change_key, at, next_attempt_at)
    SELECT e.id, NEW.id, NEW.repo_name, v_event, NEW.state, NEW.state_reason, v_at, v_at, v_at
    FROM notify_endpoints e
    WHERE ',' || e.events || ',' LIKE '%,' || v_event || ',%'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
DROP TRIGGER runs_notify ON runs;
CREATE TRIGGER runs_notify AFTER UPDATE OF state ON runs
FOR EACH ROW
WHEN (NEW.state <> OLD.state AND NEW.state IN ('waiting', 'exited', 'stopped', 'failed', 'lost'))
EXECUTE FUNCTION runs_notify();
