//! The repo forms: the create form's fields, a repo's settings sections
//! (each empty choice naming what it inherits, from the resolver), and the
//! patch a posted form makes.

use super::form_values::{change, dollars, number, options_patch};
use super::forms::{Form, FormErrors, FormField, Kind, Section, select};
use super::settings_page::option_fields;
use crate::domain::{Change, Defaults, RunKind, Sourced};
use crate::provider::{self, Provider, ProviderId};
use crate::repo::{self, Repo, RepoPatch};
use crate::resolve::{Request, Resolved, resolve};
use crate::settings::DefaultsPatch;
use crate::validate::{Errors as ValueErrors, FieldError, Invalid};

fn text(name: &str, label: &str, value: String, placeholder: &str) -> FormField {
    FormField::new(
        name,
        label,
        Kind::Text {
            value,
            placeholder: placeholder.to_owned(),
        },
    )
}

fn provider_choice(current: &str) -> Kind {
    let ids = provider::ids();
    select(None, &ids, current)
}

pub(super) fn create_fields(form: Option<&Form>, errors: &mut FormErrors) -> Vec<FormField> {
    let v = |n: &str| form.and_then(|f| f.get(n)).unwrap_or("").to_owned();
    let provider = form
        .and_then(|f| f.get("provider"))
        .unwrap_or(provider::DEFAULT_PROVIDER);
    vec![
        text("name", "Name", v("name"), "my-repo")
            .help("Letters, digits, '.', '_' and '-'.")
            .error_from(errors),
        text("path", "Local path", v("path"), "/srv/src/my-repo")
            .help("A git repository on the lab server…")
            .error_from(errors),
        text(
            "url",
            "or clone URL",
            v("url"),
            "https://git.example.com/me/my-repo.git",
        )
        .help("…or a URL lab clones (and keeps a mirror of).")
        .error_from(errors),
        text(
            "default_branch",
            "Default branch",
            form.map_or("main".into(), |_| v("default_branch")),
            "main",
        )
        .error_from(errors),
        FormField::new("provider", "Provider", provider_choice(provider)).error_from(errors),
    ]
}

/// What a repo value would be without the repo's own setting.
fn inherited(
    p: ProviderId,
    global: &Defaults,
    repo: &Defaults,
    kind: RunKind,
    clear: impl Fn(&mut Defaults),
) -> Resolved {
    let mut without = repo.clone();
    clear(&mut without);
    resolve(p, kind, global, &without, &Request::default())
}

/// A model or effort choice whose empty option names what it inherits.
fn default_choice(
    name: &str,
    label: &str,
    inherits: &Sourced,
    values: &[&str],
    current: &str,
    errors: &mut FormErrors,
) -> FormField {
    let inherit = format!(
        "same as default: {} ({})",
        inherits.value,
        inherits.layer.describe()
    );
    FormField::new(name, label, select(Some(inherit), values, current)).error_from(errors)
}

/// The repo page's sections, for a repo of provider `id` (a repo whose
/// provider left the catalog gets a page that says so instead).
pub(super) fn sections(
    repo: &Repo,
    id: ProviderId,
    global: &Defaults,
    settings: &crate::settings::Settings,
    form: Option<&Form>,
    errors: &mut FormErrors,
) -> Vec<Section> {
    let p = id.provider();
    let d = &repo.defaults;
    let v = |name: &str, stored: Option<&str>| match form {
        Some(f) => f.get(name).unwrap_or("").to_owned(),
        None => stored.unwrap_or("").to_owned(),
    };
    let manual_model = inherited(id, global, d, RunKind::Manual, |x| x.model_default = None).model;
    let manual_effort =
        inherited(id, global, d, RunKind::Manual, |x| x.effort_default = None).effort;
    let afk_model = inherited(id, global, d, RunKind::Afk, |x| x.afk_model_default = None).model;
    let afk_effort = inherited(id, global, d, RunKind::Afk, |x| x.afk_effort_default = None).effort;
    let inherit_option = |key: &str| {
        let r = inherited(id, global, d, RunKind::Afk, |x| {
            x.afk_options.remove(key);
        });
        match r.options.get(key) {
            Some(s) => {
                let value = match s.value.as_str() {
                    "true" => "on",
                    "false" => "off",
                    other => other,
                };
                format!("same as default: {value} ({})", s.layer.describe())
            }
            None => "same as default".to_owned(),
        }
    };
    let enabled = match form {
        Some(f) => f.get("afk_enabled") == Some("true"),
        None => repo.afk_enabled,
    };
    let mut afk = vec![
        FormField::new(
            "afk_enabled",
            "Let the AFK scheduler take this repo's issues",
            Kind::Checkbox(enabled),
        )
        .error_from(errors),
        text(
            "afk_label",
            "Label of ready issues",
            v("afk_label", Some(&repo.afk_label)),
            repo::DEFAULT_AFK_LABEL,
        )
        .error_from(errors),
        FormField::new(
            "afk_max_concurrent",
            "Most AFK runs at once",
            Kind::Number {
                value: v(
                    "afk_max_concurrent",
                    Some(&repo.afk_max_concurrent.to_string()),
                ),
                min: repo::AFK_MAX_CONCURRENT.0,
                max: repo::AFK_MAX_CONCURRENT.1,
            },
        )
        .error_from(errors),
        default_choice(
            "afk_model_default",
            "AFK model",
            &afk_model,
            p.models(),
            &v("afk_model_default", d.afk_model_default.as_deref()),
            errors,
        ),
        default_choice(
            "afk_effort_default",
            "AFK effort",
            &afk_effort,
            p.efforts(),
            &v("afk_effort_default", d.afk_effort_default.as_deref()),
            errors,
        ),
    ];
    afk.extend(option_fields(p, "", d, v, &inherit_option, errors));
    vec![
        Section {
            title: "Repository".into(),
            intro: String::new(),
            fields: vec![
                text("name", "Name", v("name", Some(&repo.name)), "").error_from(errors),
                text("path", "Local path", v("path", repo.path()), "").error_from(errors),
                text("url", "or clone URL", v("url", repo.url()), "").error_from(errors),
                text(
                    "default_branch",
                    "Default branch",
                    v("default_branch", Some(&repo.default_branch)),
                    "main",
                )
                .error_from(errors),
                FormField::new(
                    "provider",
                    "Provider",
                    provider_choice(&v("provider", Some(&repo.provider))),
                )
                .help("Changing it reports the values below that do not fit the new provider.")
                .error_from(errors),
            ],
        },
        Section {
            title: "Defaults".into(),
            intro: "What a manual start is pre-filled with, and what AFK runs fall back to.".into(),
            fields: vec![
                default_choice(
                    "model_default",
                    "Model",
                    &manual_model,
                    p.models(),
                    &v("model_default", d.model_default.as_deref()),
                    errors,
                ),
                default_choice(
                    "effort_default",
                    "Effort",
                    &manual_effort,
                    p.efforts(),
                    &v("effort_default", d.effort_default.as_deref()),
                    errors,
                ),
            ],
        },
        Section {
            title: "Issues".into(),
            intro: "Where AFK work comes from: lab's own tracker, or a forge.".into(),
            fields: vec![
                FormField::new(
                    "issue_source",
                    "Issue source",
                    select(
                        None,
                        crate::repo::issue_source::SOURCE_KINDS,
                        &v("issue_source", Some(repo.issues.source.as_str())),
                    ),
                )
                .help("gitea also serves Forgejo.")
                .error_from(errors),
                text(
                    "forge_url",
                    "Forge URL",
                    v("forge_url", repo.issues.forge_url.as_deref()),
                    "https://git.example.com",
                )
                .error_from(errors),
                text(
                    "forge_repo",
                    "Forge repository",
                    v("forge_repo", repo.issues.forge_repo.as_deref()),
                    "owner/name",
                )
                .error_from(errors),
                FormField::new("forge_token", "Forge token", Kind::Password)
                    .help(match repo.issues.token_hint() {
                        Some(h) => format!("A token is stored ({h}); leave empty to keep it."),
                        None => {
                            "Or set LAB_GITEA_TOKEN / LAB_GITHUB_TOKEN for lab. Runs never see it."
                                .to_owned()
                        }
                    })
                    .error_from(errors),
            ],
        },
        Section {
            title: "Sandbox".into(),
            intro:
                "Every run starts in lab's sandbox where this machine has one (lab doctor says)."
                    .into(),
            fields: vec![
                FormField::new(
                    "allow_unsandboxed",
                    "Without a sandbox, start runs that ask nobody",
                    on_off(
                        "same as the global setting",
                        &v(
                            "allow_unsandboxed",
                            repo.allow_unsandboxed.map(|b| b.to_string()).as_deref(),
                        ),
                    ),
                )
                .help(
                    "An AFK run with an unattended permission mode runs text anyone can write \
                     into an issue; without a sandbox it reaches all that lab's user can.",
                )
                .error_from(errors),
            ],
        },
        Section {
            title: "AFK".into(),
            intro: "What AFK runs of this repo use. An empty choice inherits the value it names."
                .into(),
            fields: afk,
        },
        super::kind_form::repo_section(repo, settings, form, errors),
        Section {
            title: "Checks and budgets".into(),
            intro: "After each round of an AFK run's agent on its pull request, lab runs the check \
                    command in the run's workspace, in its sandbox; a failure sends the agent back to \
                    work. Empty budgets inherit the global ones."
                .into(),
            fields: vec![
                FormField::new(
                    "check_command",
                    "Check command",
                    Kind::Text {
                        value: v("check_command", repo.check_command.as_deref()),
                        placeholder: "none (e.g. cargo test)".into(),
                    },
                )
                .help("Exit status 0 is green.")
                .error_from(errors),
                FormField::new(
                    "afk_run_timeout_minutes",
                    "Run time limit (minutes)",
                    Kind::Number {
                        value: v(
                            "afk_run_timeout_minutes",
                            repo.budget.run_timeout_minutes.map(|n| n.to_string()).as_deref(),
                        ),
                        min: crate::settings::RUN_TIMEOUT_MINUTES.0,
                        max: crate::settings::RUN_TIMEOUT_MINUTES.1,
                    },
                )
                .error_from(errors),
                FormField::new(
                    "afk_max_tokens",
                    "Token budget per run",
                    Kind::Number {
                        value: v(
                            "afk_max_tokens",
                            repo.budget.max_tokens.map(|n| n.to_string()).as_deref(),
                        ),
                        min: crate::settings::MAX_TOKENS.0,
                        max: crate::settings::MAX_TOKENS.1,
                    },
                )
                .error_from(errors),
                FormField::new(
                    "afk_max_cost_usd",
                    "Cost budget per run (US dollars)",
                    Kind::Text {
                        value: v(
                            "afk_max_cost_usd",
                            repo.budget
                                .max_cost_nano_usd
                                .map(|n| crate::domain::nano_to_usd(n).to_string())
                                .as_deref(),
                        ),
                        placeholder: "the global budget".into(),
                    },
                )
                .error_from(errors),
                FormField::new(
                    "memory_max_mb",
                    "Memory per run at most (MiB)",
                    Kind::Number {
                        value: v(
                            "memory_max_mb",
                            repo.limits.memory_max_mb.map(|n| n.to_string()).as_deref(),
                        ),
                        min: crate::settings::MEMORY_MAX_MB.0,
                        max: crate::settings::MEMORY_MAX_MB.1,
                    },
                )
                .help("Empty: the global setting. Every run of the repo, manual or AFK.")
                .error_from(errors),
                FormField::new(
                    "pids_max",
                    "Processes per run at most",
                    Kind::Number {
                        value: v(
                            "pids_max",
                            repo.limits.pids_max.map(|n| n.to_string()).as_deref(),
                        ),
                        min: crate::settings::PIDS_MAX.0,
                        max: crate::settings::PIDS_MAX.1,
                    },
                )
                .help("Empty: the global setting.")
                .error_from(errors),
            ],
        },
        Section {
            title: "Knobs".into(),
            intro: "Directives this repo's AFK runs get unless their issue sets them (labctl \
                    knobs lists them); an issue may only narrow what the repo allows. An empty \
                    choice inherits the repo's .lab.toml, then the global settings."
                .into(),
            fields: {
                let mut f = super::knob_form::fields(
                    &repo.knobs,
                    form,
                    &|key| {
                        let from_file = repo.file().and_then(|f| f.knobs.get(key));
                        match (from_file, settings.knobs.get(key)) {
                            (Some(v), _) => super::knob_form::inherited(v, "the repo's .lab.toml"),
                            (None, Some(v)) => super::knob_form::inherited(v, "the global settings"),
                            (None, None) => super::knob_form::inherited(
                                &crate::knob::get(key)
                                    .map(|k| k.default())
                                    .unwrap_or(crate::knob::Value::List(Vec::new())),
                                "the knob's default",
                            ),
                        }
                    },
                    errors,
                );
                f.push(
                    FormField::new(
                        "allowed_models",
                        "Models its issues may ask for",
                        Kind::Text {
                            value: v("allowed_models", Some(&repo.allowed_models.join(", "))),
                            placeholder: "any of the provider's".into(),
                        },
                    )
                    .help("Separated by commas; empty: every model of the provider's catalog.")
                    .error_from(errors),
                );
                f
            },
        },
    ]
}

/// The patch a repo form posts: every field it shows is set (empty clears).
/// The create form shows only the repository's own fields.
/// The patch a repo form posts: `editing` the repo's page, whose options
/// are `p`'s, or (`None`) the create form, which has none.
pub(super) fn patch_from(
    form: &Form,
    editing: Option<&dyn Provider>,
) -> Result<RepoPatch, Invalid> {
    let mut errs = ValueErrors::default();
    let set_if = |name: &str| form.value(name).map_or(Change::Keep, Change::Set);
    let (path, url) = (set_if("path"), set_if("url"));
    if editing.is_some() && path.is_keep() && url.is_keep() {
        errs.push(FieldError::new(
            "path",
            "a repo needs a local path or a clone URL",
        ));
    }
    let mut patch = RepoPatch {
        name: set_if("name"),
        path,
        url,
        default_branch: change(form, "default_branch"),
        provider: change(form, "provider"),
        ..RepoPatch::default()
    };
    if let Some(p) = editing {
        patch.defaults = DefaultsPatch {
            model_default: change(form, "model_default"),
            effort_default: change(form, "effort_default"),
            afk_model_default: change(form, "afk_model_default"),
            afk_effort_default: change(form, "afk_effort_default"),
            afk_options: options_patch(p, "", form),
            ..DefaultsPatch::default()
        };
        super::kind_form::repo_patch(form, &mut patch);
        if form.has("afk_enabled.shown") {
            patch.afk_enabled = Change::Set(form.get("afk_enabled") == Some("true"));
        }
        patch.afk_label = change(form, "afk_label");
        patch.allow_unsandboxed = match form.value("allow_unsandboxed").as_deref() {
            Some("true") => Change::Set(true),
            Some("false") => Change::Set(false),
            Some(other) => {
                errs.push(
                    crate::validate::FieldError::new("allow_unsandboxed", "must be true or false")
                        .with_value(crate::validate::shown(other)),
                );
                Change::Keep
            }
            None => Change::Clear,
        };
        patch.afk_max_concurrent = number(form, "afk_max_concurrent", &mut errs);
        if form.has("check_command") {
            patch.check_command = change(form, "check_command");
            patch.afk_run_timeout_minutes = number(form, "afk_run_timeout_minutes", &mut errs);
            patch.afk_max_tokens = number(form, "afk_max_tokens", &mut errs);
            patch.afk_max_cost_nano_usd = dollars(form, "afk_max_cost_usd", &mut errs);
            patch.memory_max_mb = number(form, "memory_max_mb", &mut errs);
            patch.pids_max = number(form, "pids_max", &mut errs);
        }
        patch.knobs = super::knob_form::input(form);
        patch.allowed_models = form.get("allowed_models").map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect()
        });
        patch.issues = crate::repo::issue_source::IssueConfigPatch {
            source: change(form, "issue_source"),
            forge_url: change(form, "forge_url"),
            forge_repo: change(form, "forge_repo"),
            // An empty password field keeps the stored token.
            forge_token: set_if("forge_token"),
        };
    }
    errs.finish()?;
    Ok(patch)
}

/// A bool that may inherit: an inherit entry, then on and off.
fn on_off(inherit: &str, current: &str) -> Kind {
    let mut k = select(Some(inherit.to_owned()), &["true", "false"], current);
    if let Kind::Select(choices) = &mut k {
        for c in choices.iter_mut().skip(1) {
            c.label = if c.value == "true" { "on" } else { "off" }.into();
        }
    }
    k
}
