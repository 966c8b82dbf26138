//! Repo rows.

use sqlx::FromRow;

use super::settings::ProviderRow;
use super::{
    Result, Store, StoreError, conflict_on_unique, in_tx, now_ms, on_db, on_read, options_json,
    parse_options,
};
use crate::domain::Defaults;
use crate::repo::config_file::ConfigState;
use crate::repo::issue_source::{IssueConfig, SourceKind};
use crate::repo::{Repo, RepoBudget, RepoLimits, RepoSource};

use crate::validate::Invalid;

/// How a request names a repo: its id, or its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RepoKey {
    Id(i64),
    Name(String),
}

impl RepoKey {
    /// Digits are an id (repo names are never all digits); anything else a name.
    pub fn parse(s: &str) -> RepoKey {
        match s.parse::<i64>() {
            Ok(id) if !s.starts_with('+') => RepoKey::Id(id),
            _ => RepoKey::Name(s.to_owned()),
        }
    }
}

impl std::fmt::Display for RepoKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RepoKey::Id(id) => write!(f, "{id}"),
            RepoKey::Name(n) => f.write_str(&crate::validate::shown(n)),
        }
    }
}

const COLUMNS: &str = "r.id, r.name, r.path, r.url, r.default_branch, r.provider, r.model_default, \
     r.effort_default, r.afk_model_default, r.afk_effort_default, r.afk_options, r.afk_enabled, \
     r.afk_label, r.afk_max_concurrent, r.afk_paused, r.issue_source, r.forge_url, r.forge_repo, r.forge_token, \
     r.allow_unsandboxed, r.check_command, r.afk_max_tokens, r.afk_max_cost_nano_usd, r.afk_run_timeout_minutes, \
     r.memory_max_mb, r.pids_max, r.knobs, r.allowed_models, r.config_commit, r.config_file, r.config_error, \
     r.created_at, r.updated_at, r.plan_provider, r.review_provider, r.plan_model_default, \
     r.plan_effort_default, r.plan_options, r.review_model_default, r.review_effort_default, r.review_options";

#[derive(FromRow)]
struct RepoRow {
    id: i64,
    name: String,
    path: Option<String>,
    url: Option<String>,
    default_branch: String,
    provider: String,
    model_default: Option<String>,
    effort_default: Option<String>,
    afk_model_default: Option<String>,
    afk_effort_default: Option<String>,
    afk_options: String,
    afk_enabled: bool,
    afk_label: String,
    afk_max_concurrent: i64,
    afk_paused: bool,
    issue_source: String,
    forge_url: Option<String>,
    forge_repo: Option<String>,
    forge_token: Option<String>,
    allow_unsandboxed: Option<bool>,
    check_command: Option<String>,
    afk_max_tokens: Option<i64>,
    afk_max_cost_nano_usd: Option<i64>,
    afk_run_timeout_minutes: Option<i64>,
    memory_max_mb: Option<i64>,
    pids_max: Option<i64>,
    knobs: String,
    allowed_models: String,
    config_commit: Option<String>,
    config_file: Option<String>,
    config_error: Option<String>,
    created_at: i64,
    updated_at: i64,
    plan_provider: Option<String>,
    review_provider: Option<String>,
    plan_model_default: Option<String>,
    plan_effort_default: Option<String>,
    plan_options: String,
    review_model_default: Option<String>,
    review_effort_default: Option<String>,
    review_options: String,
}

impl TryFrom<RepoRow> for Repo {
    type Error = StoreError;
    fn try_from(r: RepoRow) -> Result<Repo> {
        let source = match (r.path, r.url) {
            (Some(p), None) => RepoSource::Path(p),
            (None, Some(u)) => RepoSource::Url(u),
            _ => {
                return Err(StoreError::Corrupt(format!(
                    "repo {} has no single source",
                    r.id
                )));
            }
        };
        Ok(Repo {
            id: r.id,
            name: r.name,
            source,
            default_branch: r.default_branch,
            provider: r.provider,
            plan_provider: r.plan_provider,
            review_provider: r.review_provider,
            defaults: Defaults {
                model_default: r.model_default,
                effort_default: r.effort_default,
                afk_model_default: r.afk_model_default,
                afk_effort_default: r.afk_effort_default,
                afk_options: parse_options("repos.afk_options", &r.afk_options)?,
                plan: super::kind_defaults(
                    "repos.plan_options",
                    r.plan_model_default,
                    r.plan_effort_default,
                    &r.plan_options,
                )?,
                review: super::kind_defaults(
                    "repos.review_options",
                    r.review_model_default,
                    r.review_effort_default,
                    &r.review_options,
                )?,
            },
            afk_enabled: r.afk_enabled,
            afk_label: r.afk_label,
            afk_max_concurrent: r.afk_max_concurrent,
            afk_paused: r.afk_paused,
            issues: IssueConfig {
                source: SourceKind::parse("issue_source", &r.issue_source)
                    .map_err(|e| StoreError::Corrupt(format!("repo {}: {}", r.id, e.message)))?,
                forge_url: r.forge_url,
                forge_repo: r.forge_repo,
                forge_token: r.forge_token,
            },
            allow_unsandboxed: r.allow_unsandboxed,
            check_command: r.check_command,
            budget: RepoBudget {
                max_tokens: r.afk_max_tokens,
                max_cost_nano_usd: r.afk_max_cost_nano_usd,
                run_timeout_minutes: r.afk_run_timeout_minutes,
            },
            limits: RepoLimits {
                memory_max_mb: r.memory_max_mb,
                pids_max: r.pids_max,
            },
            knobs: super::knobs_column("repos.knobs", &r.knobs)?,
            allowed_models: serde_json::from_str(&r.allowed_models)
                .map_err(|e| StoreError::Corrupt(format!("repos.allowed_models: {e}")))?,
            config: ConfigState {
                commit: r.config_commit,
                file: r
                    .config_file
                    .as_deref()
                    .map(serde_json::from_str)
                    .transpose()
                    .map_err(|e| StoreError::Corrupt(format!("repos.config_file: {e}")))?,
                error: r.config_error,
            },
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

/// A repo row joined with its provider's global defaults: what the resolver
/// needs, in one round trip.
#[derive(FromRow)]
struct RepoWithGlobalRow {
    #[sqlx(flatten)]
    repo: RepoRow,
    g_provider: Option<String>,
    g_model_default: Option<String>,
    g_effort_default: Option<String>,
    g_afk_model_default: Option<String>,
    g_afk_effort_default: Option<String>,
    g_afk_options: Option<String>,
    g_plan_model_default: Option<String>,
    g_plan_effort_default: Option<String>,
    g_plan_options: Option<String>,
    g_review_model_default: Option<String>,
    g_review_effort_default: Option<String>,
    g_review_options: Option<String>,
}

fn where_key(key: &RepoKey) -> &'static str {
    match key {
        RepoKey::Id(_) => "r.id = $1",
        RepoKey::Name(_) => "r.name = $1",
    }
}

macro_rules! bind_key {
    ($q:expr, $key:expr) => {
        match $key {
            RepoKey::Id(id) => $q.bind(*id),
            RepoKey::Name(n) => $q.bind(n.as_str()),
        }
    };
}

impl Store {
    pub async fn repos(&self) -> Result<Vec<Repo>> {
        let sql = format!("SELECT {COLUMNS} FROM repos r ORDER BY r.name");
        let rows: Vec<RepoRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await?
        });
        rows.into_iter().map(Repo::try_from).collect()
    }

    pub async fn repo(&self, key: &RepoKey) -> Result<Repo> {
        let sql = format!("SELECT {COLUMNS} FROM repos r WHERE {}", where_key(key));
        let row: Option<RepoRow> = on_read!(self, conn => {
            bind_key!(sqlx::query_as(sqlx::AssertSqlSafe(sql)), key).fetch_optional(conn).await
        });
        row.ok_or(StoreError::NotFound)?.try_into()
    }

    /// The id of the repo a request names: from the cache when it has the
    /// repo, else one small read. `None` when no repo has that name or id.
    pub async fn repo_id(&self, key: &RepoKey) -> Result<Option<i64>> {
        if let Some((repo, _)) = self.cache.repo(key) {
            return Ok(Some(repo.id));
        }
        let sql = format!("SELECT r.id FROM repos r WHERE {}", where_key(key));
        let row: Option<(i64,)> = on_read!(self, conn => {
            bind_key!(sqlx::query_as(sqlx::AssertSqlSafe(sql)), key).fetch_optional(conn).await
        });
        Ok(row.map(|(id,)| id))
    }

    /// A repo and the global defaults of its provider: from the cache when it
    /// has them (ADR 11), else in one query.
    pub async fn repo_with_global(&self, key: &RepoKey) -> Result<(Repo, Defaults)> {
        if let Some(hit) = self.cache.repo(key) {
            return Ok(hit);
        }
        let generation = self.cache.generation();
        let sql = format!(
            "SELECT {COLUMNS}, g.provider AS g_provider, g.model_default AS g_model_default, \
             g.effort_default AS g_effort_default, g.afk_model_default AS g_afk_model_default, \
             g.afk_effort_default AS g_afk_effort_default, g.afk_options AS g_afk_options, \
             g.plan_model_default AS g_plan_model_default, g.plan_effort_default AS g_plan_effort_default, \
             g.plan_options AS g_plan_options, g.review_model_default AS g_review_model_default, \
             g.review_effort_default AS g_review_effort_default, g.review_options AS g_review_options \
             FROM repos r LEFT JOIN provider_settings g ON g.provider = r.provider WHERE {}",
            where_key(key)
        );
        let row: Option<RepoWithGlobalRow> = on_read!(self, conn => {
            bind_key!(sqlx::query_as(sqlx::AssertSqlSafe(sql)), key).fetch_optional(conn).await
        });
        let row = row.ok_or(StoreError::NotFound)?;
        let global = match row.g_provider {
            None => Defaults::default(),
            Some(provider) => {
                ProviderRow {
                    provider,
                    model_default: row.g_model_default,
                    effort_default: row.g_effort_default,
                    afk_model_default: row.g_afk_model_default,
                    afk_effort_default: row.g_afk_effort_default,
                    afk_options: row.g_afk_options.unwrap_or_else(|| "{}".to_owned()),
                    plan_model_default: row.g_plan_model_default,
                    plan_effort_default: row.g_plan_effort_default,
                    plan_options: row.g_plan_options.unwrap_or_else(|| "{}".to_owned()),
                    review_model_default: row.g_review_model_default,
                    review_effort_default: row.g_review_effort_default,
                    review_options: row.g_review_options.unwrap_or_else(|| "{}".to_owned()),
                }
                .into_defaults()?
                .1
            }
        };
        let value = (row.repo.try_into()?, global);
        self.cache.store_repo(generation, key, &value);
        Ok(value)
    }

    /// Inserts a validated new repo. A taken name is a conflict. The cache
    /// holds no entry a new repo could change (it never holds a miss).
    pub async fn create_repo(&self, repo: &Repo) -> Result<Repo> {
        let now = now_ms();
        let sql = format!(
            "INSERT INTO repos (name, path, url, default_branch, provider, model_default, effort_default, \
             afk_model_default, afk_effort_default, afk_options, afk_enabled, afk_label, afk_max_concurrent, \
             afk_paused, issue_source, forge_url, forge_repo, forge_token, allow_unsandboxed, check_command, afk_max_tokens, \
             afk_max_cost_nano_usd, afk_run_timeout_minutes, memory_max_mb, pids_max, knobs, allowed_models, \
             created_at, updated_at, plan_provider, review_provider, plan_model_default, plan_effort_default, \
             plan_options, review_model_default, review_effort_default, review_options) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $15, $16, $17, $18, $19, $20, \
             $21, $22, $23, $24, $25, $26, $27, $28, $14, $14, $29, $30, $31, $32, $33, $34, $35, $36) \
             RETURNING {}",
            COLUMNS.replace("r.", "")
        );
        let row: RepoRow = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&repo.name)
                .bind(repo.path())
                .bind(repo.url())
                .bind(&repo.default_branch)
                .bind(&repo.provider)
                .bind(&repo.defaults.model_default)
                .bind(&repo.defaults.effort_default)
                .bind(&repo.defaults.afk_model_default)
                .bind(&repo.defaults.afk_effort_default)
                .bind(options_json(&repo.defaults.afk_options))
                .bind(repo.afk_enabled)
                .bind(&repo.afk_label)
                .bind(repo.afk_max_concurrent)
                .bind(now)
                .bind(repo.afk_paused)
                .bind(repo.issues.source.as_str())
                .bind(&repo.issues.forge_url)
                .bind(&repo.issues.forge_repo)
                .bind(&repo.issues.forge_token)
                .bind(repo.allow_unsandboxed)
                .bind(&repo.check_command)
                .bind(repo.budget.max_tokens)
                .bind(repo.budget.max_cost_nano_usd)
                .bind(repo.budget.run_timeout_minutes)
                .bind(repo.limits.memory_max_mb)
                .bind(repo.limits.pids_max)
                .bind(super::knobs_json(&repo.knobs))
                .bind(models_json(&repo.allowed_models))
                .bind(&repo.plan_provider)
                .bind(&repo.review_provider)
                .bind(&repo.defaults.plan.model_default)
                .bind(&repo.defaults.plan.effort_default)
                .bind(options_json(&repo.defaults.plan.options))
                .bind(&repo.defaults.review.model_default)
                .bind(&repo.defaults.review.effort_default)
                .bind(options_json(&repo.defaults.review.options))
                .fetch_one(pool)
                .await
                .map_err(|e| conflict_on_unique(e, || format!("a repo named '{}' already exists", repo.name)))?
        });
        row.try_into()
    }

    /// Changes a repo in one transaction: read, let `change` check and apply,
    /// write. When `change` rejects, nothing is written.
    pub async fn update_repo(
        &self,
        key: &RepoKey,
        change: impl FnOnce(&Repo) -> std::result::Result<Repo, Invalid>,
    ) -> Result<Repo> {
        let now = now_ms();
        let select = format!("SELECT {COLUMNS} FROM repos r WHERE {}", where_key(key));
        let lock = format!("{select} FOR UPDATE");
        in_tx!(self.db(), tx, pg_lock: "", changes: &self.cache => {
            let sql = if self.backend() == "postgres" { lock } else { select };
            let row: Option<RepoRow> = bind_key!(sqlx::query_as(sqlx::AssertSqlSafe(sql)), key)
                .fetch_optional(&mut *tx)
                .await?;
            match row.map(Repo::try_from).transpose()? {
                None => Err(StoreError::NotFound),
                Some(current) => match change(&current) {
                    Err(e) => Err(e.into()),
                    Ok(next) => {
                        let name = next.name.clone();
                        sqlx::query(
                            "UPDATE repos SET name = $1, path = $2, url = $3, default_branch = $4, provider = $5, \
                             model_default = $6, effort_default = $7, afk_model_default = $8, \
                             afk_effort_default = $9, afk_options = $10, afk_enabled = $11, afk_label = $12, \
                             afk_max_concurrent = $13, updated_at = $14, afk_paused = $16, issue_source = $17, \
                             forge_url = $18, forge_repo = $19, forge_token = $20, allow_unsandboxed = $21, \
                             check_command = $22, afk_max_tokens = $23, afk_max_cost_nano_usd = $24, \
                             afk_run_timeout_minutes = $25, memory_max_mb = $26, pids_max = $27, knobs = $28, \
                             allowed_models = $29, plan_provider = $30, review_provider = $31, \
                             plan_model_default = $32, plan_effort_default = $33, plan_options = $34, \
                             review_model_default = $35, review_effort_default = $36, review_options = $37 \
                             WHERE id = $15",
                        )
                        .bind(&next.name)
                        .bind(next.path())
                        .bind(next.url())
                        .bind(&next.default_branch)
                        .bind(&next.provider)
                        .bind(&next.defaults.model_default)
                        .bind(&next.defaults.effort_default)
                        .bind(&next.defaults.afk_model_default)
                        .bind(&next.defaults.afk_effort_default)
                        .bind(options_json(&next.defaults.afk_options))
                        .bind(next.afk_enabled)
                        .bind(&next.afk_label)
                        .bind(next.afk_max_concurrent)
                        .bind(now)
                        .bind(current.id)
                        .bind(next.afk_paused)
                        .bind(next.issues.source.as_str())
                        .bind(&next.issues.forge_url)
                        .bind(&next.issues.forge_repo)
                        .bind(&next.issues.forge_token)
                        .bind(next.allow_unsandboxed)
                        .bind(&next.check_command)
                        .bind(next.budget.max_tokens)
                        .bind(next.budget.max_cost_nano_usd)
                        .bind(next.budget.run_timeout_minutes)
                        .bind(next.limits.memory_max_mb)
                        .bind(next.limits.pids_max)
                        .bind(super::knobs_json(&next.knobs))
                        .bind(models_json(&next.allowed_models))
                        .bind(&next.plan_provider)
                        .bind(&next.review_provider)
                        .bind(&next.defaults.plan.model_default)
                        .bind(&next.defaults.plan.effort_default)
                        .bind(options_json(&next.defaults.plan.options))
                        .bind(&next.defaults.review.model_default)
                        .bind(&next.defaults.review.effort_default)
                        .bind(options_json(&next.defaults.review.options))
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| conflict_on_unique(e, || format!("a repo named '{name}' already exists")))?;
                        Ok(Repo { updated_at: now, ..next })
                    }
                },
            }
        })
    }

    /// Records what lab made of a repo's `.lab.toml` (issue 27): a valid
    /// read replaces the kept file and clears the error; a refused one keeps
    /// the file and records its error. False when the repo is gone.
    pub async fn set_repo_config(&self, id: i64, state: &ConfigState) -> Result<bool> {
        let file = state
            .file
            .as_ref()
            .map(|f| serde_json::to_string(f).unwrap_or_else(|_| "{}".to_owned()));
        in_tx!(self.db(), tx, pg_lock: "", changes: &self.cache => {
            let done = sqlx::query(
                "UPDATE repos SET config_commit = $1, config_file = $2, config_error = $3 WHERE id = $4",
            )
            .bind(&state.commit)
            .bind(&file)
            .bind(&state.error)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }

    pub async fn delete_repo(&self, key: &RepoKey) -> Result<()> {
        let sql = format!(
            "DELETE FROM repos WHERE {}",
            where_key(key).replace("r.", "")
        );
        in_tx!(self.db(), tx, pg_lock: "", changes: &self.cache => {
            let done = bind_key!(sqlx::query(sqlx::AssertSqlSafe(sql)), key)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if done == 0 { Err(StoreError::NotFound) } else { Ok(()) }
        })
    }
}

fn models_json(models: &[String]) -> String {
    serde_json::to_string(models).unwrap_or_else(|_| "[]".to_owned())
}
