//! Global settings rows.

use sqlx::FromRow;

use super::{Result, Store, in_tx, now_ms, on_read, options_json, parse_options};

use super::outbox::{EndpointRow, SELECT_ENDPOINTS};
use crate::domain::Defaults;
use crate::settings::notifications::{self, Endpoint};
use crate::settings::{self, AfkLimits, RunSettings, Settings, SettingsPatch};
use crate::validate::Errors;

#[derive(FromRow)]
pub(super) struct ProviderRow {
    pub provider: String,
    pub model_default: Option<String>,
    pub effort_default: Option<String>,
    pub afk_model_default: Option<String>,
    pub afk_effort_default: Option<String>,
    pub afk_options: String,
    pub plan_model_default: Option<String>,
    pub plan_effort_default: Option<String>,
    pub plan_options: String,
    pub review_model_default: Option<String>,
    pub review_effort_default: Option<String>,
    pub review_options: String,
}

impl ProviderRow {
    pub fn into_defaults(self) -> Result<(String, Defaults)> {
        let afk_options = parse_options("provider_settings.afk_options", &self.afk_options)?;
        Ok((
            self.provider,
            Defaults {
                model_default: self.model_default,
                effort_default: self.effort_default,
                afk_model_default: self.afk_model_default,
                afk_effort_default: self.afk_effort_default,
                afk_options,
                plan: super::kind_defaults(
                    "provider_settings.plan_options",
                    self.plan_model_default,
                    self.plan_effort_default,
                    &self.plan_options,
                )?,
                review: super::kind_defaults(
                    "provider_settings.review_options",
                    self.review_model_default,
                    self.review_effort_default,
                    &self.review_options,
                )?,
            },
        ))
    }
}

#[derive(FromRow)]
struct GlobalRow {
    afk_max_concurrent: i64,
    afk_tick_seconds: i64,
    afk_run_timeout_minutes: i64,
    afk_max_rounds: i64,
    afk_max_plan_rounds: i64,
    afk_max_attempts: i64,
    afk_max_tokens: Option<i64>,
    afk_max_cost_nano_usd: Option<i64>,
    afk_memory_per_run_mb: i64,
    workspace_retention_hours: Option<i64>,
    allow_unsandboxed: bool,
    run_memory_max_mb: Option<i64>,
    run_pids_max: Option<i64>,
    run_log_max_mb: i64,
    carry_cli_keys: String,
    knobs: String,
    plan_provider: Option<String>,
    review_provider: Option<String>,
}

/// Everything in one round trip: the global row, joined with each provider
/// row (one row with NULL provider columns when there are none).
const SELECT_ALL: &str = "SELECT g.afk_max_concurrent, g.afk_tick_seconds, g.afk_run_timeout_minutes, \
     g.afk_max_rounds, g.afk_max_attempts, g.afk_max_tokens, g.afk_max_cost_nano_usd, g.afk_memory_per_run_mb, \
     g.workspace_retention_hours, g.allow_unsandboxed, g.run_memory_max_mb, g.run_pids_max, \
     g.run_log_max_mb, g.carry_cli_keys, g.knobs, g.afk_max_plan_rounds, g.plan_provider, g.review_provider, \
     p.provider, p.model_default, p.effort_default, p.afk_model_default, \
     p.afk_effort_default, p.afk_options, p.plan_model_default, p.plan_effort_default, p.plan_options, \
     p.review_model_default, p.review_effort_default, p.review_options FROM global_settings g LEFT JOIN provider_settings p ON 1 = 1 \
     WHERE g.id = 1 ORDER BY p.provider";

#[derive(FromRow)]
struct AllRow {
    #[sqlx(flatten)]
    g: GlobalRow,
    provider: Option<String>,
    model_default: Option<String>,
    effort_default: Option<String>,
    afk_model_default: Option<String>,
    afk_effort_default: Option<String>,
    afk_options: Option<String>,
    plan_model_default: Option<String>,
    plan_effort_default: Option<String>,
    plan_options: Option<String>,
    review_model_default: Option<String>,
    review_effort_default: Option<String>,
    review_options: Option<String>,
}

fn assemble_all(rows: Vec<AllRow>) -> Result<Settings> {
    let mut rows = rows.into_iter().peekable();
    let Some(first) = rows.peek() else {
        return Err(super::StoreError::Corrupt(
            "global_settings has no row".into(),
        ));
    };
    let g = GlobalRow {
        afk_max_concurrent: first.g.afk_max_concurrent,
        afk_tick_seconds: first.g.afk_tick_seconds,
        afk_run_timeout_minutes: first.g.afk_run_timeout_minutes,
        afk_max_rounds: first.g.afk_max_rounds,
        afk_max_plan_rounds: first.g.afk_max_plan_rounds,
        afk_max_attempts: first.g.afk_max_attempts,
        afk_max_tokens: first.g.afk_max_tokens,
        afk_max_cost_nano_usd: first.g.afk_max_cost_nano_usd,
        afk_memory_per_run_mb: first.g.afk_memory_per_run_mb,
        workspace_retention_hours: first.g.workspace_retention_hours,
        allow_unsandboxed: first.g.allow_unsandboxed,
        run_memory_max_mb: first.g.run_memory_max_mb,
        run_pids_max: first.g.run_pids_max,
        run_log_max_mb: first.g.run_log_max_mb,
        carry_cli_keys: first.g.carry_cli_keys.clone(),
        knobs: first.g.knobs.clone(),
        plan_provider: first.g.plan_provider.clone(),
        review_provider: first.g.review_provider.clone(),
    };
    let providers = rows
        .filter_map(|r| {
            Some(ProviderRow {
                provider: r.provider?,
                model_default: r.model_default,
                effort_default: r.effort_default,
                afk_model_default: r.afk_model_default,
                afk_effort_default: r.afk_effort_default,
                afk_options: r.afk_options.unwrap_or_else(|| "{}".into()),
                plan_model_default: r.plan_model_default,
                plan_effort_default: r.plan_effort_default,
                plan_options: r.plan_options.unwrap_or_else(|| "{}".into()),
                review_model_default: r.review_model_default,
                review_effort_default: r.review_effort_default,
                review_options: r.review_options.unwrap_or_else(|| "{}".into()),
            })
        })
        .collect();
    assemble(providers, g)
}

fn assemble(rows: Vec<ProviderRow>, g: GlobalRow) -> Result<Settings> {
    let mut s = Settings {
        afk: AfkLimits {
            max_concurrent: g.afk_max_concurrent,
            tick_seconds: g.afk_tick_seconds,
            run_timeout_minutes: g.afk_run_timeout_minutes,
            max_rounds: g.afk_max_rounds,
            max_plan_rounds: g.afk_max_plan_rounds,
            max_attempts: g.afk_max_attempts,
            max_tokens: g.afk_max_tokens,
            max_cost_nano_usd: g.afk_max_cost_nano_usd,
            memory_per_run_mb: g.afk_memory_per_run_mb,
        },
        runs: RunSettings {
            workspace_retention_hours: g.workspace_retention_hours,
            allow_unsandboxed: g.allow_unsandboxed,
            memory_max_mb: g.run_memory_max_mb,
            pids_max: g.run_pids_max,
            log_max_mb: g.run_log_max_mb,
            carry_cli_keys: serde_json::from_str(&g.carry_cli_keys).map_err(|e| {
                super::StoreError::Corrupt(format!("global_settings.carry_cli_keys: {e}"))
            })?,
        },
        knobs: super::knobs_column("global_settings.knobs", &g.knobs)?,
        // A provider that left lab's catalog is as if unset.
        kinds: settings::KindProviders {
            plan: g.plan_provider.and_then(|p| p.parse().ok()),
            review: g.review_provider.and_then(|p| p.parse().ok()),
        },
        ..Settings::default()
    };
    for row in rows {
        let (id, d) = row.into_defaults()?;
        // A provider that left lab's catalog keeps its row, unread.
        if let Ok(id) = id.parse() {
            s.providers.insert(id, d);
        }
    }
    Ok(s)
}

impl Store {
    /// The settings, from the cache when it has them (ADR 11).
    pub async fn settings(&self) -> Result<Settings> {
        if let Some(hit) = self.cache.settings() {
            return Ok(hit);
        }
        let generation = self.cache.generation();
        let rows: Vec<AllRow> = on_read!(self, conn => {
            sqlx::query_as(SELECT_ALL).fetch_all(conn).await
        });
        let settings = assemble_all(rows)?;
        self.cache.store_settings(generation, &settings);
        Ok(settings)
    }

    /// Applies a settings change in one transaction: read, validate, write.
    /// A change that fails validation writes nothing.
    pub async fn update_settings(&self, patch: &SettingsPatch) -> Result<Settings> {
        let _announce = self.writing(super::Written::Settings);
        let now = now_ms();
        in_tx!(self.db(), tx, pg_lock: "SELECT id FROM global_settings WHERE id = 1 FOR UPDATE", changes: &self.cache => {
            let rows: Vec<AllRow> = sqlx::query_as(SELECT_ALL).fetch_all(&mut *tx).await?;
            let current = assemble_all(rows)?;
            let stored: Vec<EndpointRow> = match &patch.notifications {
                Some(_) => sqlx::query_as(SELECT_ENDPOINTS).fetch_all(&mut *tx).await?,
                None => Vec::new(),
            };
            match both(&current, &stored, patch) {
                Err(e) => Err(e),
                Ok((next, endpoints)) => {
                    if let Some(list) = endpoints {
                        // Kept endpoints keep their rows (and what they are
                        // owed); the others go, with their pending rows.
                        let mut keep = Vec::new();
                        for (i, e) in list.iter().enumerate() {
                            let same = stored.iter().find(|r| {
                                !keep.contains(&r.id) && r.kind == e.kind && r.url == e.url && r.token == e.token
                            });
                            match same {
                                Some(r) => {
                                    keep.push(r.id);
                                    sqlx::query("UPDATE notify_endpoints SET position = $1, events = $2 WHERE id = $3")
                                        .bind(i as i64)
                                        .bind(e.events_text())
                                        .bind(r.id)
                                        .execute(&mut *tx)
                                        .await?;
                                }
                                None => {
                                    let (id,): (i64,) = sqlx::query_as(
                                        "INSERT INTO notify_endpoints (position, kind, url, token, events, created_at) \
                                         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                                    )
                                    .bind(i as i64)
                                    .bind(e.kind)
                                    .bind(&e.url)
                                    .bind(&e.token)
                                    .bind(e.events_text())
                                    .bind(now)
                                    .fetch_one(&mut *tx)
                                    .await?;
                                    keep.push(id);
                                }
                            }
                        }
                        for r in stored.iter().filter(|r| !keep.contains(&r.id)) {
                            sqlx::query("DELETE FROM notify_endpoints WHERE id = $1")
                                .bind(r.id)
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                    // `apply` checked every id of the patch and set each.
                    let changed = next
                        .providers
                        .iter()
                        .filter(|(id, _)| patch.providers.contains_key(id.as_str()));
                    for (id, d) in changed {
                        sqlx::query(
                            "INSERT INTO provider_settings (provider, model_default, effort_default, \
                             afk_model_default, afk_effort_default, afk_options, updated_at, plan_model_default, \
                             plan_effort_default, plan_options, review_model_default, review_effort_default, \
                             review_options) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
                             ON CONFLICT (provider) DO UPDATE SET model_default = $2, effort_default = $3, \
                             afk_model_default = $4, afk_effort_default = $5, afk_options = $6, updated_at = $7, \
                             plan_model_default = $8, plan_effort_default = $9, plan_options = $10, \
                             review_model_default = $11, review_effort_default = $12, review_options = $13",
                        )
                        .bind(id.as_str())
                        .bind(&d.model_default)
                        .bind(&d.effort_default)
                        .bind(&d.afk_model_default)
                        .bind(&d.afk_effort_default)
                        .bind(options_json(&d.afk_options))
                        .bind(now)
                        .bind(&d.plan.model_default)
                        .bind(&d.plan.effort_default)
                        .bind(options_json(&d.plan.options))
                        .bind(&d.review.model_default)
                        .bind(&d.review.effort_default)
                        .bind(options_json(&d.review.options))
                        .execute(&mut *tx)
                        .await?;
                    }
                    if next.knobs != current.knobs {
                        sqlx::query("UPDATE global_settings SET knobs = $1, updated_at = $2 WHERE id = 1")
                            .bind(super::knobs_json(&next.knobs))
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                    }
                    if next.kinds != current.kinds {
                        sqlx::query(
                            "UPDATE global_settings SET plan_provider = $1, review_provider = $2, \
                             updated_at = $3 WHERE id = 1",
                        )
                        .bind(next.kinds.plan.map(|p| p.as_str()))
                        .bind(next.kinds.review.map(|p| p.as_str()))
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    }
                    if next.afk != current.afk || next.runs != current.runs {
                        sqlx::query(
                            "UPDATE global_settings SET afk_max_concurrent = $1, afk_tick_seconds = $2, \
                             afk_run_timeout_minutes = $3, workspace_retention_hours = $4, updated_at = $5, \
                             allow_unsandboxed = $6, afk_max_rounds = $7, afk_max_attempts = $8, afk_max_tokens = $9, \
                             afk_max_cost_nano_usd = $10, afk_memory_per_run_mb = $11, run_memory_max_mb = $12, \
                             run_pids_max = $13, run_log_max_mb = $14, carry_cli_keys = $15, \
                             afk_max_plan_rounds = $16 WHERE id = 1",
                        )
                        .bind(next.afk.max_concurrent)
                        .bind(next.afk.tick_seconds)
                        .bind(next.afk.run_timeout_minutes)
                        .bind(next.runs.workspace_retention_hours)
                        .bind(now)
                        .bind(next.runs.allow_unsandboxed)
                        .bind(next.afk.max_rounds)
                        .bind(next.afk.max_attempts)
                        .bind(next.afk.max_tokens)
                        .bind(next.afk.max_cost_nano_usd)
                        .bind(next.afk.memory_per_run_mb)
                        .bind(next.runs.memory_max_mb)
                        .bind(next.runs.pids_max)
                        .bind(next.runs.log_max_mb)
                        .bind(serde_json::to_string(&next.runs.carry_cli_keys).unwrap_or_else(|_| "[]".into()))
                        .bind(next.afk.max_plan_rounds)
                        .execute(&mut *tx)
                        .await?;
                    }
                    Ok(next)
                }
            }
        })
    }
}

/// The settings and the endpoints a patch makes, or every wrong field of
/// both: a patch with one wrong field writes nothing.
fn both(
    current: &Settings,
    stored: &[EndpointRow],
    patch: &SettingsPatch,
) -> Result<(Settings, Option<Vec<Endpoint>>)> {
    let mut errs = Errors::default();
    let next = errs.check_all(settings::apply(current, patch));
    let endpoints = match &patch.notifications {
        None => Some(None),
        Some(list) => {
            let stored = stored
                .iter()
                .map(EndpointRow::endpoint)
                .collect::<Result<Vec<_>>>()?;
            errs.check_all(notifications::apply(&stored, list))
                .map(Some)
        }
    };
    errs.finish()?;
    // With no error, both were applied.
    Ok((
        next.unwrap_or_else(|| current.clone()),
        endpoints.unwrap_or_default(),
    ))
}
