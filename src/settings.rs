//! Global settings: each provider's defaults and the AFK limits, and how a
//! change to them is checked and applied.
//!
//! Invariant: no IO here. The store loads and saves; this module decides.

use std::collections::BTreeMap;

use crate::domain::{Change, Defaults, RunKind};
use crate::provider::{Provider, ProviderId};

use crate::validate::{self, Errors, FieldError, Invalid};

pub mod kinds;
pub mod notifications;

pub use kinds::{KindPatch, KindProviders, KindProvidersPatch};

/// The global AFK limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfkLimits {
    pub max_concurrent: i64,
    pub tick_seconds: i64,
    pub run_timeout_minutes: i64,
    /// Rounds an AFK run may have on its pull request (the first included).
    pub max_rounds: i64,
    /// Rounds of plan and plan review an issue may have before its work
    /// starts (the first included).
    pub max_plan_rounds: i64,
    /// Attempts at one issue (the first included) before it is given up.
    pub max_attempts: i64,
    /// Tokens an AFK run may use; `None`: no cap.
    pub max_tokens: Option<i64>,
    /// What an AFK run may cost, in billionths of a dollar; `None`: no cap.
    pub max_cost_nano_usd: Option<i64>,
    /// Memory an AFK run is expected to need: a launch waits while the
    /// machine has less available (0: no check).
    pub memory_per_run_mb: i64,
}

impl Default for AfkLimits {
    fn default() -> Self {
        AfkLimits {
            max_concurrent: 2,
            tick_seconds: 30,
            run_timeout_minutes: 60,
            max_rounds: 3,
            max_plan_rounds: 3,
            max_attempts: 2,
            max_tokens: None,
            max_cost_nano_usd: None,
            memory_per_run_mb: 1024,
        }
    }
}

/// Bounds of the AFK limits, shared by validation and the pages.
pub const MAX_CONCURRENT: (i64, i64) = (1, 1000);
pub const TICK_SECONDS: (i64, i64) = (1, 86_400);
pub const RUN_TIMEOUT_MINUTES: (i64, i64) = (1, 10_080);
pub const MAX_ROUNDS: (i64, i64) = (1, 20);
pub const MAX_PLAN_ROUNDS: (i64, i64) = (1, 20);
pub const MAX_ATTEMPTS: (i64, i64) = (1, 10);
pub const MAX_TOKENS: (i64, i64) = (1_000, 1_000_000_000_000);
/// US dollars, as billionths.
pub const MAX_COST_NANO_USD: (i64, i64) = (10_000_000, 1_000_000 * 1_000_000_000);
pub const MEMORY_PER_RUN_MB: (i64, i64) = (0, 1_048_576);

/// Global settings of runs of every kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSettings {
    /// Hours an ended run's workspace is kept; `None` keeps it until the run
    /// is removed.
    pub workspace_retention_hours: Option<i64>,
    /// Whether runs that ask nobody (an unattended permission or approval
    /// mode) may start unsandboxed on a machine where lab cannot sandbox.
    pub allow_unsandboxed: bool,
    /// Top-level keys of the operator's CLI config files (Claude Code's
    /// `settings.json` and `.claude.json`, Codex's `config.toml`) that each
    /// run's own copy gets; none by default (ADR 24).
    pub carry_cli_keys: Vec<String>,
    /// Memory each run may use, in MiB (its cgroup's `memory.max`); `None`:
    /// no cap.
    pub memory_max_mb: Option<i64>,
    /// Processes and threads each run may have (`pids.max`); `None`: no cap.
    pub pids_max: Option<i64>,
    /// The most of a run's log lab keeps on disk, in MiB: past it, the
    /// oldest output is dropped.
    pub log_max_mb: i64,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            workspace_retention_hours: None,
            allow_unsandboxed: false,
            carry_cli_keys: Vec::new(),
            memory_max_mb: Some(8192),
            pids_max: Some(4096),
            log_max_mb: 64,
        }
    }
}

/// Bounds of the run limits.
pub const MEMORY_MAX_MB: (i64, i64) = (16, 1_048_576);
pub const PIDS_MAX: (i64, i64) = (16, 4_194_304);
pub const LOG_MAX_MB: (i64, i64) = (1, 65_536);
/// How many keys may be carried, and how long one may be.
pub const CARRY_KEYS: usize = 64;
pub const CARRY_KEY_LEN: usize = 128;

pub const WORKSPACE_RETENTION_HOURS: (i64, i64) = (0, 24 * 365);

/// All global settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Keyed by provider id; a provider with no row has empty defaults.
    pub providers: BTreeMap<ProviderId, Defaults>,
    pub afk: AfkLimits,
    pub runs: RunSettings,
    /// The global knobs (issue 27): each repo and issue inherits them.
    pub knobs: crate::knob::Set,
    /// The provider of plan and review runs (`None`: the repo's).
    pub kinds: KindProviders,
}

impl Settings {
    /// The defaults of one provider (empty when never set).
    pub fn provider(&self, id: ProviderId) -> Defaults {
        self.providers.get(&id).cloned().unwrap_or_default()
    }
}

/// A change to one scope's defaults. Options are changed key by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefaultsPatch {
    pub model_default: Change<String>,
    pub effort_default: Change<String>,
    pub afk_model_default: Change<String>,
    pub afk_effort_default: Change<String>,
    pub afk_options: BTreeMap<String, Change<String>>,
    /// `plan_*`: plan runs' own.
    pub plan: KindPatch,
    /// `review_*`: review runs' own.
    pub review: KindPatch,
}

impl DefaultsPatch {
    pub fn is_empty(&self) -> bool {
        self.model_default.is_keep()
            && self.effort_default.is_keep()
            && self.afk_model_default.is_keep()
            && self.afk_effort_default.is_keep()
            && self.afk_options.values().all(Change::is_keep)
            && self.plan.is_empty()
            && self.review.is_empty()
    }

    /// The change to a plan or review run's own defaults.
    pub fn kind(&self, kind: RunKind) -> Option<&KindPatch> {
        match kind {
            RunKind::Plan => Some(&self.plan),
            RunKind::Review => Some(&self.review),
            RunKind::Manual | RunKind::Afk => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AfkPatch {
    pub max_concurrent: Change<i64>,
    pub tick_seconds: Change<i64>,
    pub run_timeout_minutes: Change<i64>,
    pub max_rounds: Change<i64>,
    pub max_plan_rounds: Change<i64>,
    pub max_attempts: Change<i64>,
    pub max_tokens: Change<i64>,
    pub max_cost_nano_usd: Change<i64>,
    pub memory_per_run_mb: Change<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunsPatch {
    pub workspace_retention_hours: Change<i64>,
    pub allow_unsandboxed: Change<bool>,
    /// Replaces the list (`None`: keep it).
    pub carry_cli_keys: Option<Vec<String>>,
    pub memory_max_mb: Change<i64>,
    pub pids_max: Change<i64>,
    pub log_max_mb: Change<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsPatch {
    pub providers: BTreeMap<String, DefaultsPatch>,
    pub afk: AfkPatch,
    pub runs: RunsPatch,
    /// The notification endpoints that replace the stored ones (`None`:
    /// keep them).
    pub notifications: Option<Vec<notifications::EndpointInput>>,
    /// The knobs that replace the global ones (`None`: keep them).
    pub knobs: Option<crate::knob::Input>,
    /// `plan_provider`, `review_provider`.
    pub kinds: KindProvidersPatch,
}

/// Applies a settings change, or names every field that was wrong.
pub fn apply(current: &Settings, patch: &SettingsPatch) -> Result<Settings, Invalid> {
    let mut errs = Errors::default();
    let mut next = current.clone();
    for (id, p) in &patch.providers {
        let field = format!("providers.{id}");
        let Some(prov) = errs.check(validate::provider_id(&field, id)) else {
            continue;
        };
        let cur = current.provider(prov);
        let new = apply_defaults(prov.provider(), &cur, p, &format!("{field}."), &mut errs);
        next.providers.insert(prov, new);
    }
    let limit = |c: &Change<i64>,
                 cur: i64,
                 dflt: i64,
                 name: &str,
                 (lo, hi): (i64, i64),
                 errs: &mut Errors| match c {
        Change::Keep => cur,
        Change::Clear => dflt,
        Change::Set(v) => errs
            .check(validate::int_range(&format!("afk.{name}"), *v, lo, hi))
            .unwrap_or(cur),
    };
    let d = AfkLimits::default();
    let a = &patch.afk;
    next.afk = AfkLimits {
        max_concurrent: limit(
            &a.max_concurrent,
            current.afk.max_concurrent,
            d.max_concurrent,
            "max_concurrent",
            MAX_CONCURRENT,
            &mut errs,
        ),
        tick_seconds: limit(
            &a.tick_seconds,
            current.afk.tick_seconds,
            d.tick_seconds,
            "tick_seconds",
            TICK_SECONDS,
            &mut errs,
        ),
        run_timeout_minutes: limit(
            &a.run_timeout_minutes,
            current.afk.run_timeout_minutes,
            d.run_timeout_minutes,
            "run_timeout_minutes",
            RUN_TIMEOUT_MINUTES,
            &mut errs,
        ),
        max_rounds: limit(
            &a.max_rounds,
            current.afk.max_rounds,
            d.max_rounds,
            "max_rounds",
            MAX_ROUNDS,
            &mut errs,
        ),
        max_plan_rounds: limit(
            &a.max_plan_rounds,
            current.afk.max_plan_rounds,
            d.max_plan_rounds,
            "max_plan_rounds",
            MAX_PLAN_ROUNDS,
            &mut errs,
        ),
        max_attempts: limit(
            &a.max_attempts,
            current.afk.max_attempts,
            d.max_attempts,
            "max_attempts",
            MAX_ATTEMPTS,
            &mut errs,
        ),
        max_tokens: cap(
            &a.max_tokens,
            current.afk.max_tokens,
            "afk.max_tokens",
            MAX_TOKENS,
            &mut errs,
        ),
        max_cost_nano_usd: cost_cap(
            &a.max_cost_nano_usd,
            current.afk.max_cost_nano_usd,
            "afk.max_cost_usd",
            &mut errs,
        ),
        memory_per_run_mb: limit(
            &a.memory_per_run_mb,
            current.afk.memory_per_run_mb,
            d.memory_per_run_mb,
            "memory_per_run_mb",
            MEMORY_PER_RUN_MB,
            &mut errs,
        ),
    };
    next.runs.workspace_retention_hours = match &patch.runs.workspace_retention_hours {
        Change::Keep => current.runs.workspace_retention_hours,
        Change::Clear => None,
        Change::Set(h) => {
            let (lo, hi) = WORKSPACE_RETENTION_HOURS;
            errs.check(validate::int_range(
                "runs.workspace_retention_hours",
                *h,
                lo,
                hi,
            ))
            .or(current.runs.workspace_retention_hours)
        }
    };
    next.runs.allow_unsandboxed = match &patch.runs.allow_unsandboxed {
        Change::Keep => current.runs.allow_unsandboxed,
        Change::Clear => false,
        Change::Set(v) => *v,
    };
    next.runs.memory_max_mb = cap(
        &patch.runs.memory_max_mb,
        current.runs.memory_max_mb,
        "runs.memory_max_mb",
        MEMORY_MAX_MB,
        &mut errs,
    );
    next.runs.pids_max = cap(
        &patch.runs.pids_max,
        current.runs.pids_max,
        "runs.pids_max",
        PIDS_MAX,
        &mut errs,
    );
    next.runs.log_max_mb = match &patch.runs.log_max_mb {
        Change::Keep => current.runs.log_max_mb,
        Change::Clear => RunSettings::default().log_max_mb,
        Change::Set(v) => {
            let (lo, hi) = LOG_MAX_MB;
            errs.check(validate::int_range("runs.log_max_mb", *v, lo, hi))
                .unwrap_or(current.runs.log_max_mb)
        }
    };
    if let Some(keys) = &patch.runs.carry_cli_keys {
        next.runs.carry_cli_keys = errs
            .check(carry_keys(keys))
            .unwrap_or_else(|| current.runs.carry_cli_keys.clone());
    }
    if let Some(input) = &patch.knobs {
        next.knobs = errs
            .check_all(crate::knob::parse("knobs", input))
            .unwrap_or_else(|| current.knobs.clone());
    }
    next.kinds = kinds::apply_providers(&current.kinds, &patch.kinds, &mut errs);
    errs.finish()?;
    Ok(next)
}

/// The keys of the operator's CLI config runs carry: names of top-level
/// keys (letters, digits, `_`, `-`, `.`), each once.
pub fn carry_keys(keys: &[String]) -> Result<Vec<String>, FieldError> {
    if keys.len() > CARRY_KEYS {
        return Err(FieldError::new(
            "runs.carry_cli_keys",
            format!("at most {CARRY_KEYS} keys"),
        ));
    }
    let mut out: Vec<String> = Vec::new();
    for k in keys {
        let k = k.as_str();
        let ok = !k.is_empty()
            && k.len() <= CARRY_KEY_LEN
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !ok {
            return Err(FieldError::new(
                "runs.carry_cli_keys",
                format!(
                    "a key is a top-level name of at most {CARRY_KEY_LEN} letters, digits, '_', '-' or '.'"
                ),
            )
            .with_value(k.to_owned()));
        }
        if !out.iter().any(|o| o == k) {
            out.push(k.to_owned());
        }
    }
    Ok(out)
}

/// US dollars as billionths (the store's unit), rounded within the allowed
/// cost range; outside it, away from it, so an amount a hair out of range
/// is refused by the range check as the API document says.
pub fn usd_to_nano(usd: f64) -> i64 {
    let (lo, hi) = MAX_COST_NANO_USD;
    let n = usd * 1e9;
    let n = if n < lo as f64 {
        n.floor()
    } else if n > hi as f64 {
        n.ceil()
    } else {
        n.round()
    };
    n as i64
}

/// A budget that may be uncapped: cleared means no cap.
pub fn cap(
    c: &Change<i64>,
    cur: Option<i64>,
    field: &str,
    (lo, hi): (i64, i64),
    errs: &mut Errors,
) -> Option<i64> {
    match c {
        Change::Keep => cur,
        Change::Clear => None,
        Change::Set(v) => errs.check(validate::int_range(field, *v, lo, hi)).or(cur),
    }
}

/// A cost budget (billionths of a dollar) that may be uncapped; the error
/// speaks dollars.
pub fn cost_cap(c: &Change<i64>, cur: Option<i64>, field: &str, errs: &mut Errors) -> Option<i64> {
    match c {
        Change::Keep => cur,
        Change::Clear => None,
        Change::Set(v) => errs
            .check(validate::dollars(field, *v, MAX_COST_NANO_USD))
            .or(cur),
    }
}

/// Applies a change to one scope's defaults for provider `p` (plan and
/// review runs' own included). Field names in errors are prefixed with
/// `prefix` (`providers.codex.`, or empty).
pub fn apply_defaults(
    p: &dyn Provider,
    current: &Defaults,
    patch: &DefaultsPatch,
    prefix: &str,
    errs: &mut Errors,
) -> Defaults {
    apply_defaults_with(p, &|_| p, current, patch, prefix, errs)
}

/// [`apply_defaults`] where plan and review runs' own defaults are checked
/// against their kind's provider, `kind_p(kind)` (a repo's may differ).
pub fn apply_defaults_with<'a>(
    p: &dyn Provider,
    kind_p: &dyn Fn(RunKind) -> &'a dyn Provider,
    current: &Defaults,
    patch: &DefaultsPatch,
    prefix: &str,
    errs: &mut Errors,
) -> Defaults {
    let field = |cur: &Option<String>,
                 c: &Change<String>,
                 name: &str,
                 check: fn(&dyn Provider, &str, &str) -> Result<String, FieldError>,
                 errs: &mut Errors| {
        kinds::value_change(p, cur, c, &format!("{prefix}{name}"), check, errs)
    };
    let mut next = Defaults {
        model_default: field(
            &current.model_default,
            &patch.model_default,
            "model_default",
            validate::model,
            errs,
        ),
        effort_default: field(
            &current.effort_default,
            &patch.effort_default,
            "effort_default",
            validate::effort,
            errs,
        ),
        afk_model_default: field(
            &current.afk_model_default,
            &patch.afk_model_default,
            "afk_model_default",
            validate::model,
            errs,
        ),
        afk_effort_default: field(
            &current.afk_effort_default,
            &patch.afk_effort_default,
            "afk_effort_default",
            validate::effort,
            errs,
        ),
        afk_options: kinds::options_change(
            p,
            &current.afk_options,
            &patch.afk_options,
            &format!("{prefix}afk_options"),
            errs,
        ),
        plan: current.plan.clone(),
        review: current.review.clone(),
    };
    for (kind, name) in kinds::OWN_KINDS {
        let (Some(cur), Some(change)) = (current.kind(kind), patch.kind(kind)) else {
            continue;
        };
        let new = kinds::apply_kind(kind_p(kind), cur, change, prefix, name, errs);
        if let Some(slot) = next.kind_mut(kind) {
            *slot = new;
        }
    }
    next
}

/// Checks stored defaults against a provider: what no longer fits (after a
/// provider change, or a catalog that dropped a value).
pub fn check_defaults(p: &dyn Provider, d: &Defaults, prefix: &str) -> Result<(), Invalid> {
    check_defaults_with(p, &|_| p, d, prefix)
}

/// [`check_defaults`] with plan and review runs' own defaults checked
/// against their kind's provider.
pub fn check_defaults_with<'a>(
    p: &dyn Provider,
    kind_p: &dyn Fn(RunKind) -> &'a dyn Provider,
    d: &Defaults,
    prefix: &str,
) -> Result<(), Invalid> {
    let mut errs = Errors::default();
    for (kind, name) in kinds::OWN_KINDS {
        if let Some(own) = d.kind(kind) {
            kinds::check_kind(kind_p(kind), own, prefix, name, &mut errs);
        }
    }
    let fit = |v: &Option<String>,
               name: &str,
               check: fn(&dyn Provider, &str, &str) -> Result<String, FieldError>,
               errs: &mut Errors| {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            errs.check(check(p, &format!("{prefix}{name}"), v));
        }
    };
    fit(
        &d.model_default,
        "model_default",
        validate::model,
        &mut errs,
    );
    fit(
        &d.effort_default,
        "effort_default",
        validate::effort,
        &mut errs,
    );
    fit(
        &d.afk_model_default,
        "afk_model_default",
        validate::model,
        &mut errs,
    );
    fit(
        &d.afk_effort_default,
        "afk_effort_default",
        validate::effort,
        &mut errs,
    );
    for (k, v) in &d.afk_options {
        errs.check(validate::option(
            p,
            &format!("{prefix}afk_options.{k}"),
            k,
            v,
        ));
    }
    errs.finish()
}

/// Every provider id, with its defaults (empty for a provider never set).
pub fn all_providers(s: &Settings) -> BTreeMap<ProviderId, Defaults> {
    ProviderId::all().map(|id| (id, s.provider(id))).collect()
}

#[cfg(test)]
mod tests;
