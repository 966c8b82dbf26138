//! Repos: what lab knows of a registered repository, and how a change to one
//! is checked and applied.
//!
//! Invariant: no IO here (whether a path really holds a repository is checked
//! by the caller, through the workspace module).

use crate::domain::{Change, Defaults};
pub mod config_file;
pub mod issue_source;
pub mod kinds;

use crate::provider::{self, ProviderId};
use issue_source::{IssueConfig, IssueConfigPatch};

use crate::settings::{self, DefaultsPatch};
use crate::validate::{self, Errors, FieldError, Invalid};

pub const DEFAULT_BRANCH: &str = "main";
pub const DEFAULT_AFK_LABEL: &str = "ready-for-agent";
pub const DEFAULT_AFK_MAX_CONCURRENT: i64 = 1;
pub const AFK_MAX_CONCURRENT: (i64, i64) = (1, 100);

/// Where a repo's code comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoSource {
    /// A repository on this machine.
    Path(String),
    /// A clone URL; lab keeps a mirror of it in the data dir.
    Url(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub id: i64,
    pub name: String,
    pub source: RepoSource,
    pub default_branch: String,
    pub provider: String,
    /// The provider of its plan and review runs (ADR 32); `None`: the
    /// global choice, else `provider`.
    pub plan_provider: Option<String>,
    pub review_provider: Option<String>,
    pub defaults: Defaults,
    pub afk_enabled: bool,
    pub afk_label: String,
    pub afk_max_concurrent: i64,
    /// The scheduler leaves a paused repo alone.
    pub afk_paused: bool,
    pub issues: IssueConfig,
    /// Whether runs that ask nobody may start unsandboxed where lab cannot
    /// sandbox; `None` inherits the global setting.
    pub allow_unsandboxed: Option<bool>,
    /// What lab runs in a run's workspace (sandboxed) after each round of
    /// its agent once it opened its pull request; exit 0 is green.
    pub check_command: Option<String>,
    /// The repo's AFK budgets; `None` inherits the global ones.
    pub budget: RepoBudget,
    /// Memory and process caps of its runs; `None` inherits the global ones.
    pub limits: RepoLimits,
    /// The repo's knobs (issue 27), over the global ones.
    pub knobs: crate::knob::Set,
    /// The models its issues may ask for, in the catalog's casing; empty:
    /// the provider's whole catalog.
    pub allowed_models: Vec<String>,
    /// What lab last made of the repo's `.lab.toml`.
    pub config: config_file::ConfigState,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Repo {
    pub fn path(&self) -> Option<&str> {
        match &self.source {
            RepoSource::Path(p) => Some(p),
            RepoSource::Url(_) => None,
        }
    }

    pub fn url(&self) -> Option<&str> {
        match &self.source {
            RepoSource::Url(u) => Some(u),
            RepoSource::Path(_) => None,
        }
    }

    /// The repo's provider. Stored ids are validated on write, so this only
    /// fails for a database edited by hand.
    pub fn provider(&self) -> Result<ProviderId, FieldError> {
        validate::provider_id("provider", &self.provider)
    }
}

/// A repo's overrides of the global AFK budgets (`None`: inherit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepoBudget {
    pub max_tokens: Option<i64>,
    pub max_cost_nano_usd: Option<i64>,
    pub run_timeout_minutes: Option<i64>,
}

impl RepoBudget {
    /// The budgets that hold for this repo's AFK runs.
    pub fn over(&self, global: &crate::settings::AfkLimits) -> Budget {
        Budget {
            max_tokens: self.max_tokens.or(global.max_tokens),
            max_cost_nano_usd: self.max_cost_nano_usd.or(global.max_cost_nano_usd),
            run_timeout_minutes: self
                .run_timeout_minutes
                .unwrap_or(global.run_timeout_minutes),
        }
    }
}

/// A repo's caps on each of its runs (ADR 24); `None` inherits
/// `runs.memory_max_mb` and `runs.pids_max`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepoLimits {
    pub memory_max_mb: Option<i64>,
    pub pids_max: Option<i64>,
}

impl Repo {
    /// The caps its runs get: the repo's own, else the global settings'.
    pub fn run_limits(&self, global: &crate::settings::RunSettings) -> crate::domain::RunLimits {
        crate::domain::RunLimits {
            memory_max_mb: self.limits.memory_max_mb.or(global.memory_max_mb),
            pids_max: self.limits.pids_max.or(global.pids_max),
        }
    }
}

/// What one AFK run may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_tokens: Option<i64>,
    pub max_cost_nano_usd: Option<i64>,
    pub run_timeout_minutes: i64,
}

impl Budget {
    /// This budget lowered by what an issue set (never raised: a cap that
    /// fell below the issue's since stays the lower).
    pub fn lowered(self, by: &crate::domain::IssueBudget) -> Budget {
        let min = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Budget {
            max_tokens: min(by.max_tokens, self.max_tokens),
            max_cost_nano_usd: min(by.max_cost_nano_usd, self.max_cost_nano_usd),
            run_timeout_minutes: by
                .run_timeout_minutes
                .map_or(self.run_timeout_minutes, |m| {
                    m.min(self.run_timeout_minutes)
                }),
        }
    }
}

/// A change to a repo, or (applied to nothing) a new repo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoPatch {
    pub name: Change<String>,
    pub path: Change<String>,
    pub url: Change<String>,
    pub default_branch: Change<String>,
    pub provider: Change<String>,
    pub plan_provider: Change<String>,
    pub review_provider: Change<String>,
    pub defaults: DefaultsPatch,
    pub afk_enabled: Change<bool>,
    pub afk_label: Change<String>,
    pub afk_max_concurrent: Change<i64>,
    pub afk_paused: Change<bool>,
    pub issues: IssueConfigPatch,
    pub allow_unsandboxed: Change<bool>,
    pub check_command: Change<String>,
    pub afk_max_tokens: Change<i64>,
    pub afk_max_cost_nano_usd: Change<i64>,
    pub afk_run_timeout_minutes: Change<i64>,
    pub memory_max_mb: Change<i64>,
    pub pids_max: Change<i64>,
    /// The knobs that replace the repo's (`None`: keep them).
    pub knobs: Option<crate::knob::Input>,
    /// The models that replace the allowed list (`None`: keep it; empty:
    /// the whole catalog).
    pub allowed_models: Option<Vec<String>>,
}

/// A new repo from a create request. Its id and times are the store's.
pub fn create(patch: &RepoPatch) -> Result<Repo, Invalid> {
    let blank = Repo {
        id: 0,
        name: String::new(),
        source: RepoSource::Path(String::new()),
        default_branch: DEFAULT_BRANCH.to_owned(),
        provider: provider::DEFAULT_PROVIDER.to_owned(),
        plan_provider: None,
        review_provider: None,
        defaults: Defaults::default(),
        afk_enabled: false,
        afk_label: DEFAULT_AFK_LABEL.to_owned(),
        afk_max_concurrent: DEFAULT_AFK_MAX_CONCURRENT,
        afk_paused: false,
        allow_unsandboxed: None,
        check_command: None,
        budget: RepoBudget::default(),
        limits: RepoLimits::default(),
        issues: IssueConfig::default(),
        knobs: crate::knob::Set::new(),
        allowed_models: Vec::new(),
        config: config_file::ConfigState::default(),
        created_at: 0,
        updated_at: 0,
    };
    let mut errs = Errors::default();
    if !matches!(patch.name, Change::Set(_)) {
        errs.push(FieldError::new("name", "is required"));
    }
    if !matches!(patch.path, Change::Set(_)) && !matches!(patch.url, Change::Set(_)) {
        errs.push(FieldError::new(
            "path",
            "either path (a local repository) or url (a clone URL) is required",
        ));
    }
    let result = apply(&blank, patch);
    if let Err(e) = &result {
        errs.extend(e.clone());
    }
    errs.finish()?;
    result
}

/// Applies a change to a repo, or names every field that was wrong.
pub fn apply(current: &Repo, patch: &RepoPatch) -> Result<Repo, Invalid> {
    let mut errs = Errors::default();
    let mut next = current.clone();

    match &patch.name {
        Change::Keep => {}
        Change::Clear => errs.push(FieldError::new("name", "is required and cannot be cleared")),
        Change::Set(v) => {
            if let Some(v) = errs.check(validate::repo_name("name", v)) {
                next.name = v;
            }
        }
    }

    match (&patch.path, &patch.url) {
        (Change::Set(_), Change::Set(_)) => {
            errs.push(FieldError::new("url", "give either path or url, not both"))
        }
        (Change::Set(p), _) => {
            if let Some(p) = errs.check(validate::repo_path("path", p)) {
                next.source = RepoSource::Path(p);
            }
        }
        (_, Change::Set(u)) => {
            if let Some(u) = errs.check(validate::repo_url("url", u)) {
                next.source = RepoSource::Url(u);
            }
        }
        (Change::Clear, _) if current.path().is_some() => errs.push(FieldError::new(
            "path",
            "a repo needs a path or a url: set the other one instead of clearing this one",
        )),
        (_, Change::Clear) if current.url().is_some() => errs.push(FieldError::new(
            "url",
            "a repo needs a path or a url: set the other one instead of clearing this one",
        )),
        _ => {}
    }

    match &patch.default_branch {
        Change::Keep => {}
        Change::Clear => next.default_branch = DEFAULT_BRANCH.to_owned(),
        Change::Set(v) => {
            if let Some(v) = errs.check(validate::branch("default_branch", v)) {
                next.default_branch = v;
            }
        }
    }

    let new_provider = match &patch.provider {
        Change::Keep => current.provider.clone(),
        Change::Clear => provider::DEFAULT_PROVIDER.to_owned(),
        Change::Set(v) => errs
            .check(validate::provider_id("provider", v.trim()))
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| current.provider.clone()),
    };
    kinds::apply_providers(current, patch, &mut next, &mut errs);
    match validate::provider_id("provider", &new_provider) {
        Ok(p) => {
            let p = p.provider();
            next.provider = new_provider.clone();
            kinds::apply_defaults(current, patch, &mut next, &mut errs);
            match &patch.allowed_models {
                Some(list) => {
                    if let Some(l) = errs.check(allowed_models(p, list)) {
                        next.allowed_models = l;
                    }
                }
                // Kept models must fit a new provider too.
                None if new_provider != current.provider => {
                    if let Err(mut e) = allowed_models(p, &current.allowed_models) {
                        e.message = format!(
                            "{}; it does not fit the new provider {new_provider}: set \
                             allowed_models in the same request",
                            e.message
                        );
                        errs.push(e);
                    }
                }
                None => {}
            }
        }
        Err(e) => errs.push(e),
    }

    match &patch.afk_enabled {
        Change::Keep => {}
        Change::Clear => next.afk_enabled = false,
        Change::Set(v) => next.afk_enabled = *v,
    }
    match &patch.afk_label {
        Change::Keep => {}
        Change::Clear => next.afk_label = DEFAULT_AFK_LABEL.to_owned(),
        Change::Set(v) if v.trim().is_empty() => next.afk_label = DEFAULT_AFK_LABEL.to_owned(),
        Change::Set(v) => {
            if let Some(v) = errs.check(validate::label("afk_label", v)) {
                next.afk_label = v;
            }
        }
    }
    match &patch.afk_max_concurrent {
        Change::Keep => {}
        Change::Clear => next.afk_max_concurrent = DEFAULT_AFK_MAX_CONCURRENT,
        Change::Set(v) => {
            let (lo, hi) = AFK_MAX_CONCURRENT;
            if let Some(v) = errs.check(validate::int_range("afk_max_concurrent", *v, lo, hi)) {
                next.afk_max_concurrent = v;
            }
        }
    }
    match &patch.allow_unsandboxed {
        Change::Keep => {}
        Change::Clear => next.allow_unsandboxed = None,
        Change::Set(v) => next.allow_unsandboxed = Some(*v),
    }
    match &patch.afk_paused {
        Change::Keep => {}
        Change::Clear => next.afk_paused = false,
        Change::Set(v) => next.afk_paused = *v,
    }
    match &patch.check_command {
        Change::Keep => {}
        Change::Clear => next.check_command = None,
        Change::Set(v) if v.trim().is_empty() => next.check_command = None,
        Change::Set(v) => {
            if let Some(v) = errs.check(validate::check_command("check_command", v)) {
                next.check_command = Some(v);
            }
        }
    }
    let b = current.budget;
    next.budget = RepoBudget {
        max_tokens: settings::cap(
            &patch.afk_max_tokens,
            b.max_tokens,
            "afk_max_tokens",
            settings::MAX_TOKENS,
            &mut errs,
        ),
        max_cost_nano_usd: settings::cost_cap(
            &patch.afk_max_cost_nano_usd,
            b.max_cost_nano_usd,
            "afk_max_cost_usd",
            &mut errs,
        ),
        run_timeout_minutes: settings::cap(
            &patch.afk_run_timeout_minutes,
            b.run_timeout_minutes,
            "afk_run_timeout_minutes",
            settings::RUN_TIMEOUT_MINUTES,
            &mut errs,
        ),
    };
    let l = current.limits;
    next.limits = RepoLimits {
        memory_max_mb: settings::cap(
            &patch.memory_max_mb,
            l.memory_max_mb,
            "memory_max_mb",
            settings::MEMORY_MAX_MB,
            &mut errs,
        ),
        pids_max: settings::cap(
            &patch.pids_max,
            l.pids_max,
            "pids_max",
            settings::PIDS_MAX,
            &mut errs,
        ),
    };
    next.issues = crate::repo::issue_source::apply(&current.issues, &patch.issues, &mut errs);
    if let Some(input) = &patch.knobs {
        next.knobs = errs
            .check_all(crate::knob::parse("knobs", input))
            .unwrap_or_else(|| current.knobs.clone());
    }
    errs.finish()?;
    Ok(next)
}

/// The most models an allowed list may name.
pub const MAX_ALLOWED_MODELS: usize = 64;

/// The models a repo's issues may ask for: each in the provider's catalog,
/// in its casing, once.
pub fn allowed_models(
    p: &dyn crate::provider::Provider,
    list: &[String],
) -> Result<Vec<String>, FieldError> {
    if list.len() > MAX_ALLOWED_MODELS {
        return Err(FieldError::new(
            "allowed_models",
            format!("at most {MAX_ALLOWED_MODELS} models"),
        ));
    }
    let mut out: Vec<String> = Vec::new();
    for m in list.iter().filter(|m| !m.trim().is_empty()) {
        let m = validate::model(p, "allowed_models", m)?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

impl Repo {
    /// Whether an issue of this repo may ask for this model (in the
    /// catalog's casing).
    pub fn allows_model(&self, model: &str) -> bool {
        self.allowed_models.is_empty() || self.allowed_models.iter().any(|m| m == model)
    }

    /// The repo's `.lab.toml`, when lab holds a valid one.
    pub fn file(&self) -> Option<&config_file::RepoFile> {
        self.config.file.as_ref()
    }

    /// The check command its AFK runs get: the operator's, else the
    /// `.lab.toml`'s.
    pub fn effective_check_command(&self) -> Option<&str> {
        self.check_command
            .as_deref()
            .or_else(|| self.file().and_then(|f| f.check_command.as_deref()))
    }

    /// The label its AFK runs take issues by: the operator's when they set
    /// one other than the default, else the `.lab.toml`'s, else the default.
    pub fn effective_label(&self) -> &str {
        match self.file().and_then(|f| f.label.as_deref()) {
            Some(l) if self.afk_label == DEFAULT_AFK_LABEL => l,
            _ => &self.afk_label,
        }
    }
}

/// The stored values a patch leaves as they were.
fn untouched(d: &Defaults, patch: &DefaultsPatch) -> Defaults {
    let keep = |v: &Option<String>, c: &Change<String>| if c.is_keep() { v.clone() } else { None };
    Defaults {
        model_default: keep(&d.model_default, &patch.model_default),
        effort_default: keep(&d.effort_default, &patch.effort_default),
        afk_model_default: keep(&d.afk_model_default, &patch.afk_model_default),
        afk_effort_default: keep(&d.afk_effort_default, &patch.afk_effort_default),
        afk_options: d
            .afk_options
            .iter()
            .filter(|(k, _)| patch.afk_options.get(*k).is_none_or(Change::is_keep))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        plan: patch.plan.untouched(&d.plan),
        review: patch.review.untouched(&d.review),
    }
}

#[cfg(test)]
mod tests;
