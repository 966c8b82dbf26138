-- Plan and review runs (issue 28, ADR 32): each kind has its own defaults
-- beside the AFK ones, globally per provider and per repo (NULL, or '{}'
-- for options: inherit the AFK ones), and may run on another provider than
-- the repo's (NULL: the global choice, else the repo's provider). An issue
-- may go through at most afk_max_plan_rounds rounds of plan and review.
ALTER TABLE provider_settings ADD COLUMN plan_model_default TEXT;
ALTER TABLE provider_settings ADD COLUMN plan_effort_default TEXT;
ALTER TABLE provider_settings ADD COLUMN plan_options TEXT NOT NULL DEFAULT '{}';
ALTER TABLE provider_settings ADD COLUMN review_model_default TEXT;
ALTER TABLE provider_settings ADD COLUMN review_effort_default TEXT;
ALTER TABLE provider_settings ADD COLUMN review_options TEXT NOT NULL DEFAULT '{}';
ALTER TABLE repos ADD COLUMN plan_model_default TEXT;
ALTER TABLE repos ADD COLUMN plan_effort_default TEXT;
ALTER TABLE repos ADD COLUMN plan_options TEXT NOT NULL DEFAULT '{}';
ALTER TABLE repos ADD COLUMN review_model_default TEXT;
ALTER TABLE repos ADD COLUMN review_effort_default TEXT;
ALTER TABLE repos ADD COLUMN review_options TEXT NOT NULL DEFAULT '{}';
ALTER TABLE repos ADD COLUMN plan_provider TEXT;
ALTER TABLE repos ADD COLUMN review_provider TEXT;
ALTER TABLE global_settings ADD COLUMN plan_provider TEXT;
ALTER TABLE global_settings ADD COLUMN review_provider TEXT;
ALTER TABLE global_settings ADD COLUMN afk_max_plan_rounds BIGINT NOT NULL DEFAULT 3;
