//! The global settings page: each provider's defaults and AFK defaults,
//! rendered from its declared schema, and the AFK limits.

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::form_values::{change, dollars, number, options_patch};
use super::forms::{Form, FormErrors, FormField, Kind, Section, select};
use super::notify_form;
use super::{Chrome, Page};
use crate::auth::browser::BrowserSession;
use crate::domain::{Change, Defaults, RunKind};
use crate::provider::{self, Provider, ProviderId};
use crate::resolve::{Request, resolve};
use crate::settings::{self, AfkPatch, DefaultsPatch, RunsPatch, Settings, SettingsPatch};
use crate::state::AppState;
use crate::validate::Errors as ValueErrors;

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    chrome: Chrome,
    sections: Vec<Section>,
    /// The notification endpoints (`notify_form.rs`).
    notify: Vec<Section>,
    saved: bool,
    problems: Vec<String>,
    failed: bool,
    /// What each endpoint said to "Send a test", after one.
    tested: Option<Vec<crate::notifications::TestSent>>,
    /// Whether any endpoint is configured (the test button shows then).
    has_endpoints: bool,
}

/// What a field shows: what the user just typed, or what is stored.
struct Values<'a> {
    form: Option<&'a Form>,
}

impl Values<'_> {
    fn get(&self, name: &str, stored: Option<&str>) -> String {
        match self.form {
            Some(f) => f.get(name).unwrap_or("").to_owned(),
            None => stored.unwrap_or("").to_owned(),
        }
    }
}

/// The inherit entry of an AFK select: what the value would be without it.
fn afk_inherit(p: ProviderId, d: &Defaults, model: bool) -> String {
    let mut without = d.clone();
    if model {
        without.afk_model_default = None;
    } else {
        without.afk_effort_default = None;
    }
    let r = resolve(
        p,
        RunKind::Afk,
        &without,
        &Defaults::default(),
        &Request::default(),
    );
    let v = if model { r.model } else { r.effort };
    format!("same as default: {} ({})", v.value, v.layer.describe())
}

/// The fields of one provider's spawn options, from its schema: a select
/// each, whose empty entry is `inherit(key)` (what the value is without
/// one), then the values (a bool's as on and off). The same on the settings
/// page and a repo's.
pub fn option_fields(
    p: &dyn Provider,
    prefix: &str,
    current: &Defaults,
    values: impl Fn(&str, Option<&str>) -> String,
    inherit: &dyn Fn(&str) -> String,
    errors: &mut FormErrors,
) -> Vec<FormField> {
    super::kind_form::option_fields(
        p,
        &format!("{prefix}afk_options"),
        &current.afk_options,
        values,
        inherit,
        errors,
    )
}

fn sections(s: &Settings, form: Option<&Form>, errors: &mut FormErrors) -> Vec<Section> {
    let v = Values { form };
    let mut out = Vec::new();
    for id in ProviderId::all() {
        let p = id.provider();
        let d = s.provider(id);
        let pre = format!("providers.{}.", p.id());
        let n = |f: &str| format!("{pre}{f}");
        out.push(Section {
            title: format!("{}: defaults", p.name()),
            intro: "What a manual start is pre-filled with, and what AFK runs fall back to.".into(),
            fields: vec![
                FormField::new(
                    n("model_default"),
                    "Model",
                    select(
                        Some(format!(
                            "same as default: {} (the provider's default)",
                            p.default_model()
                        )),
                        p.models(),
                        &v.get(&n("model_default"), d.model_default.as_deref()),
                    ),
                )
                .error_from(errors),
                FormField::new(
                    n("effort_default"),
                    "Effort",
                    select(
                        Some(format!(
                            "same as default: {} (the provider's default)",
                            p.default_effort()
                        )),
                        p.efforts(),
                        &v.get(&n("effort_default"), d.effort_default.as_deref()),
                    ),
                )
                .error_from(errors),
            ],
        });
        let mut afk = vec![
            FormField::new(
                n("afk_model_default"),
                "AFK model",
                select(
                    Some(afk_inherit(id, &d, true)),
                    p.models(),
                    &v.get(&n("afk_model_default"), d.afk_model_default.as_deref()),
                ),
            )
            .error_from(errors),
            FormField::new(
                n("afk_effort_default"),
                "AFK effort",
                select(
                    Some(afk_inherit(id, &d, false)),
                    p.efforts(),
                    &v.get(&n("afk_effort_default"), d.afk_effort_default.as_deref()),
                ),
            )
            .error_from(errors),
        ];
        // The same choice as on a repo's page: the provider's default, on
        // or off.
        let provider_default = |key: &str| {
            let d = p
                .spawn_options()
                .iter()
                .find(|o| o.key == key)
                .map_or("", |o| o.default);
            let shown = match d {
                "true" => "on",
                "false" => "off",
                other => other,
            };
            format!("same as default: {shown} (the provider's default)")
        };
        let value = |name: &str, stored: Option<&str>| v.get(name, stored);
        afk.extend(option_fields(p, &pre, &d, value, &provider_default, errors));
        out.push(Section {
            title: format!("{}: AFK defaults", p.name()),
            intro: "What AFK runs use, literally. An empty choice inherits the value it names."
                .into(),
            fields: afk,
        });
    }
    let num = |name: &str, stored: i64, (lo, hi): (i64, i64)| Kind::Number {
        value: v.get(name, Some(&stored.to_string())),
        min: lo,
        max: hi,
    };
    out.push(Section {
        title: "AFK scheduler".into(),
        intro: "Limits of the AFK scheduler, over all repos.".into(),
        fields: vec![
            FormField::new(
                "afk.max_concurrent",
                "Most AFK runs at once",
                num(
                    "afk.max_concurrent",
                    s.afk.max_concurrent,
                    settings::MAX_CONCURRENT,
                ),
            )
            .error_from(errors),
            FormField::new(
                "afk.tick_seconds",
                "Seconds between ticks",
                num(
                    "afk.tick_seconds",
                    s.afk.tick_seconds,
                    settings::TICK_SECONDS,
                ),
            )
            .error_from(errors),
            FormField::new(
                "afk.run_timeout_minutes",
                "Run time limit (minutes)",
                num(
                    "afk.run_timeout_minutes",
                    s.afk.run_timeout_minutes,
                    settings::RUN_TIMEOUT_MINUTES,
                ),
            )
            .help("An AFK run that takes longer is stopped and recorded as timed out.")
            .error_from(errors),
            FormField::new(
                "afk.max_rounds",
                "Rounds on a pull request",
                num("afk.max_rounds", s.afk.max_rounds, settings::MAX_ROUNDS),
            )
            .help("A failing check or a review sends the run back to work this many times, the first round included; then the issue needs a person.")
            .error_from(errors),
            FormField::new(
                "afk.max_attempts",
                "Attempts per issue",
                num("afk.max_attempts", s.afk.max_attempts, settings::MAX_ATTEMPTS),
            )
            .help("A failed or timed-out run is tried again, as a new run, until this many attempts were made.")
            .error_from(errors),
            FormField::new(
                "afk.max_tokens",
                "Token budget per run",
                Kind::Number {
                    value: v.get(
                        "afk.max_tokens",
                        s.afk.max_tokens.map(|t| t.to_string()).as_deref(),
                    ),
                    min: settings::MAX_TOKENS.0,
                    max: settings::MAX_TOKENS.1,
                },
            )
            .help("Empty: no cap. A run past it is stopped and recorded as over budget.")
            .error_from(errors),
            FormField::new(
                "afk.max_cost_usd",
                "Cost budget per run (US dollars)",
                Kind::Text {
                    value: v.get(
                        "afk.max_cost_usd",
                        s.afk
                            .max_cost_nano_usd
                            .map(|n| crate::domain::nano_to_usd(n).to_string())
                            .as_deref(),
                    ),
                    placeholder: "no cap".into(),
                },
            )
            .help("Empty: no cap. Counted from the run's usage at lab's price table.")
            .error_from(errors),
            FormField::new(
                "afk.memory_per_run_mb",
                "Memory per run (MiB)",
                num(
                    "afk.memory_per_run_mb",
                    s.afk.memory_per_run_mb,
                    settings::MEMORY_PER_RUN_MB,
                ),
            )
            .help("An AFK launch waits while the machine has less memory available than this (0: no check).")
            .error_from(errors),
        ],
    });
    out.extend(super::kind_form::settings_sections(s, form, errors));
    let (lo, hi) = settings::WORKSPACE_RETENTION_HOURS;
    out.push(Section {
        title: "Runs".into(),
        intro: String::new(),
        fields: vec![
            FormField::new(
                "runs.workspace_retention_hours",
                "Keep workspaces of ended runs (hours)",
                Kind::Number {
                    value: v.get(
                        "runs.workspace_retention_hours",
                        s.runs
                            .workspace_retention_hours
                            .map(|h| h.to_string())
                            .as_deref(),
                    ),
                    min: lo,
                    max: hi,
                },
            )
            .help("Empty keeps them until the run is removed. Live runs always keep theirs.")
            .error_from(errors),
            FormField::new(
                "runs.allow_unsandboxed",
                "Without a sandbox, start runs that ask nobody",
                Kind::Checkbox(
                    v.get(
                        "runs.allow_unsandboxed",
                        Some(if s.runs.allow_unsandboxed {
                            "true"
                        } else {
                            "false"
                        }),
                    ) == "true",
                ),
            )
            .help(
                "Only matters where lab cannot sandbox runs (lab doctor says). An AFK run with an \
                 unattended permission mode then reaches all that lab's user can.",
            )
            .error_from(errors),
            FormField::new(
                "runs.memory_max_mb",
                "Memory per run at most (MiB)",
                Kind::Number {
                    value: v.get(
                        "runs.memory_max_mb",
                        s.runs.memory_max_mb.map(|m| m.to_string()).as_deref(),
                    ),
                    min: settings::MEMORY_MAX_MB.0,
                    max: settings::MEMORY_MAX_MB.1,
                },
            )
            .help(
                "Empty: no cap. A run past it is ended as failed, out of memory; the others go on.",
            )
            .error_from(errors),
            FormField::new(
                "runs.pids_max",
                "Processes per run at most",
                Kind::Number {
                    value: v.get(
                        "runs.pids_max",
                        s.runs.pids_max.map(|m| m.to_string()).as_deref(),
                    ),
                    min: settings::PIDS_MAX.0,
                    max: settings::PIDS_MAX.1,
                },
            )
            .help("Empty: no cap. Threads count too.")
            .error_from(errors),
            FormField::new(
                "runs.log_max_mb",
                "Log kept per run (MiB)",
                num("runs.log_max_mb", s.runs.log_max_mb, settings::LOG_MAX_MB),
            )
            .help("Past it, a run's oldest output is dropped; its page says how much.")
            .error_from(errors),
            FormField::new(
                "runs.carry_cli_keys",
                "CLI settings runs carry",
                Kind::Text {
                    value: v.get(
                        "runs.carry_cli_keys",
                        Some(&s.runs.carry_cli_keys.join(", ")),
                    ),
                    placeholder: "none".into(),
                },
            )
            .help(
                "Top-level keys of your Claude Code and Codex config (settings.json, .claude.json, \
                 config.toml) each run's own copy gets, separated by commas. None by default: a \
                 run gets your credentials, read-only, and lab's settings.",
            )
            .error_from(errors),
        ],
    });
    out.push(Section {
        title: "Knobs".into(),
        intro: "Directives every AFK run gets unless its repo or its issue sets them (labctl \
                knobs lists them). A knob at its default adds nothing to the prompt."
            .into(),
        fields: super::knob_form::fields(
            &s.knobs,
            form,
            &|key| {
                let d = crate::knob::get(key)
                    .map(|k| k.default())
                    .unwrap_or(crate::knob::Value::List(vec![]));
                super::knob_form::inherited(&d, "the knob's default")
            },
            errors,
        ),
    });
    out
}

fn patch_from(form: &Form) -> Result<SettingsPatch, crate::validate::Invalid> {
    let mut errs = ValueErrors::default();
    let mut patch = SettingsPatch::default();
    for p in provider::all() {
        let pre = format!("providers.{}.", p.id());
        if !form.has(&format!("{pre}model_default")) {
            continue;
        }
        patch.providers.insert(
            p.id().to_owned(),
            DefaultsPatch {
                model_default: change(form, &format!("{pre}model_default")),
                effort_default: change(form, &format!("{pre}effort_default")),
                afk_model_default: change(form, &format!("{pre}afk_model_default")),
                afk_effort_default: change(form, &format!("{pre}afk_effort_default")),
                afk_options: options_patch(*p, &pre, form),
                ..DefaultsPatch::default()
            },
        );
    }
    patch.afk = AfkPatch {
        max_concurrent: number(form, "afk.max_concurrent", &mut errs),
        tick_seconds: number(form, "afk.tick_seconds", &mut errs),
        run_timeout_minutes: number(form, "afk.run_timeout_minutes", &mut errs),
        max_rounds: number(form, "afk.max_rounds", &mut errs),
        max_attempts: number(form, "afk.max_attempts", &mut errs),
        max_tokens: number(form, "afk.max_tokens", &mut errs),
        max_cost_nano_usd: dollars(form, "afk.max_cost_usd", &mut errs),
        memory_per_run_mb: number(form, "afk.memory_per_run_mb", &mut errs),
        ..AfkPatch::default()
    };
    super::kind_form::settings_patch(form, &mut patch, &mut errs);
    patch.runs = RunsPatch {
        workspace_retention_hours: number(form, "runs.workspace_retention_hours", &mut errs),
        allow_unsandboxed: if form.has("runs.allow_unsandboxed.shown") {
            Change::Set(form.get("runs.allow_unsandboxed") == Some("true"))
        } else {
            Change::Keep
        },
        memory_max_mb: number(form, "runs.memory_max_mb", &mut errs),
        pids_max: number(form, "runs.pids_max", &mut errs),
        log_max_mb: number(form, "runs.log_max_mb", &mut errs),
        carry_cli_keys: form.get("runs.carry_cli_keys").map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        }),
    };
    patch.knobs = super::knob_form::input(form);
    errs.finish()?;
    Ok(patch)
}

#[derive(Deserialize)]
struct Saved {
    saved: Option<String>,
}

async fn show(
    State(app): State<AppState>,
    session: BrowserSession,
    Query(q): Query<Saved>,
) -> Response {
    stored(&app, &session, q.saved.is_some(), None).await
}

/// "Send a test": a test notification to every endpoint, and the page
/// with what each answered.
async fn send_test(State(app): State<AppState>, session: BrowserSession, form: Form) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    match app.notifier.send_test().await {
        Ok(sent) => stored(&app, &session, false, Some(sent)).await,
        Err(e) => super::internal(e),
    }
}

/// The page with the stored settings.
async fn stored(
    app: &AppState,
    session: &BrowserSession,
    saved: bool,
    tested: Option<Vec<crate::notifications::TestSent>>,
) -> Response {
    let s = match app.store.settings().await {
        Ok(s) => s,
        Err(e) => return super::internal(e),
    };
    let endpoints = match app.store.notifications().await {
        Ok(n) => n,
        Err(e) => return super::internal(e),
    };
    let mut errors = FormErrors::default();
    Page::ok(&SettingsPage {
        chrome: Chrome::new(session, "settings", "Settings"),
        sections: sections(&s, None, &mut errors),
        notify: notify_form::sections(&endpoints, None, &mut errors),
        saved,
        problems: Vec::new(),
        failed: false,
        tested,
        has_endpoints: !endpoints.is_empty(),
    })
}

async fn save(State(app): State<AppState>, session: BrowserSession, form: Form) -> Response {
    if let Some(r) = session.refuse_forged(&form) {
        return r;
    }
    let posted = notify_form::inputs(&form);
    let rows = posted
        .as_ref()
        .map(|(_, rows)| rows.clone())
        .unwrap_or_default();
    let result = match patch_from(&form) {
        Ok(mut patch) => {
            patch.notifications = posted.map(|(list, _)| list);
            crate::service::settings::update(&app.store, &patch)
                .await
                .map_err(|e| match e {
                    crate::service::ServiceError::Invalid(i) => Ok(notify_form::on_rows(i, &rows)),
                    other => Err(other),
                })
        }
        Err(invalid) => Err(Ok(invalid)),
    };
    match result {
        Ok(_) => Redirect::to("/settings?saved=1").into_response(),
        Err(Err(e)) => super::internal(e),
        Err(Ok(invalid)) => {
            let s = match app.store.settings().await {
                Ok(s) => s,
                Err(e) => return super::internal(e),
            };
            let endpoints = match app.store.notifications().await {
                Ok(n) => n,
                Err(e) => return super::internal(e),
            };
            let mut errors = FormErrors::from(invalid);
            let sections = sections(&s, Some(&form), &mut errors);
            let notify = notify_form::sections(&endpoints, Some(&form), &mut errors);
            Page::render(
                StatusCode::BAD_REQUEST,
                &SettingsPage {
                    chrome: Chrome::new(&session, "settings", "Settings"),
                    sections,
                    notify,
                    saved: false,
                    problems: errors.rest(),
                    failed: true,
                    tested: None,
                    has_endpoints: !endpoints.is_empty(),
                },
            )
        }
    }
}

use axum::response::IntoResponse;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/settings", get(show).post(save))
        .route("/settings/notifications/test", post(send_test))
}
