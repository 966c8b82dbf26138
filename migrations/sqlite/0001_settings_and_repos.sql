-- Global defaults, one row per provider. NULL means inherit.
CREATE TABLE provider_settings (
    provider           TEXT PRIMARY KEY NOT NULL,
    model_default      TEXT,
    effort_default     TEXT,
    afk_model_default  TEXT,
    afk_effort_default TEXT,
    afk_options        TEXT NOT NULL DEFAULT '{}',
    updated_at         INTEGER NOT NULL
);

-- Settings that are not per provider: exactly one row.
CREATE TABLE global_settings (
    id                      INTEGER PRIMARY KEY CHECK (id = 1),
    afk_max_concurrent      INTEGER NOT NULL,
    afk_tick_seconds        INTEGER NOT NULL,
    afk_run_timeout_minutes INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL
);
INSERT INTO global_settings (id, afk_max_concurrent, afk_tick_seconds, afk_run_timeout_minutes, updated_at)
VALUES (1, 2, 30, 60, 0);

CREATE TABLE repos (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    name               TEXT NOT NULL UNIQUE,
    path               TEXT,
    url                TEXT,
    default_branch     TEXT NOT NULL,
    provider           TEXT NOT NULL,
    model_default      TEXT,
    effort_default     TEXT,
    afk_model_default  TEXT,
    afk_effort_default TEXT,
    afk_options        TEXT NOT NULL DEFAULT '{}',
    afk_enabled        BOOLEAN NOT NULL DEFAULT FALSE,
    afk_label          TEXT NOT NULL DEFAULT 'ready-for-agent',
    afk_max_concurrent INTEGER NOT NULL DEFAULT 1,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    CHECK ((path IS NULL) <> (url IS NULL))
);
