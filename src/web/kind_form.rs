//! The fields of plan and review runs' own settings (issue 28, ADR 32) on
//! the settings page and a repo's page: each kind's provider, its model,
//! effort and options (of the provider they are written for), every empty
//! choice naming what it inherits from the resolver; and what a posted
//! form changes.

use std::collections::BTreeMap;

use super::form_values::{change, number};
use super::forms::{Form, FormErrors, FormField, Kind, Section, select};
use crate::domain::{Change, Defaults, KindDefaults, RunKind, Sourced};
use crate::provider::{self, OptionType, Provider, ProviderId};
use crate::repo::Repo;
use crate::resolve::{Request, resolve, resolve_kind};
use crate::settings::kinds::OWN_KINDS;
use crate::settings::{self, KindPatch, Settings, SettingsPatch};
use crate::validate::Errors as ValueErrors;

/// "same as default: opus (the global plan defaults)".
fn inherits(v: Option<&Sourced>) -> String {
    match v {
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
}

/// A select of one provider's spawn options each, named `{field}.{key}`
/// (`afk_options.ultracode`), whose empty entry is `inherit(key)`; a
/// bool's values shown as on and off.
pub fn option_fields(
    p: &dyn Provider,
    field: &str,
    stored: &BTreeMap<String, String>,
    values: impl Fn(&str, Option<&str>) -> String,
    inherit: &dyn Fn(&str) -> String,
    errors: &mut FormErrors,
) -> Vec<FormField> {
    p.spawn_options()
        .iter()
        .map(|o| {
            let name = format!("{field}.{}", o.key);
            let current = values(&name, stored.get(o.key).map(String::as_str));
            let kind = match o.ty {
                OptionType::Bool => {
                    let mut k = select(Some(inherit(o.key)), &["true", "false"], &current);
                    if let Kind::Select(choices) = &mut k {
                        for c in choices.iter_mut().skip(1) {
                            c.label = if c.value == "true" { "on" } else { "off" }.into();
                        }
                    }
                    k
                }
                OptionType::Enum => select(Some(inherit(o.key)), o.values, &current),
            };
            FormField::new(&name, o.label, kind)
                .help(o.description)
                .error_from(errors)
        })
        .collect()
}

/// What a kind resolves to with the scope's own layer changed.
type Without<'a> = &'a dyn Fn(&dyn Fn(&mut KindDefaults)) -> Option<crate::resolve::Resolved>;

/// One kind's model, effort and options fields, named `{pre}{kind}_…`, for
/// provider `p`; `resolved(without)` is what the kind resolves to with
/// the scope's own layer changed by `without`.
fn kind_fields(
    p: &dyn Provider,
    pre: &str,
    kind: RunKind,
    own: &KindDefaults,
    values: &dyn Fn(&str, Option<&str>) -> String,
    resolved: Without<'_>,
    errors: &mut FormErrors,
) -> Vec<FormField> {
    let name = kind.as_str();
    let label = if kind == RunKind::Plan {
        "Plan"
    } else {
        "Review"
    };
    let n = |f: &str| format!("{pre}{name}_{f}");
    let model = resolved(&|k| k.model_default = None);
    let effort = resolved(&|k| k.effort_default = None);
    let mut fields = vec![
        FormField::new(
            n("model_default"),
            format!("{label} model"),
            select(
                Some(inherits(model.as_ref().map(|r| &r.model))),
                p.models(),
                &values(&n("model_default"), own.model_default.as_deref()),
            ),
        )
        .error_from(errors),
        FormField::new(
            n("effort_default"),
            format!("{label} effort"),
            select(
                Some(inherits(effort.as_ref().map(|r| &r.effort))),
                p.efforts(),
                &values(&n("effort_default"), own.effort_default.as_deref()),
            ),
        )
        .error_from(errors),
    ];
    let inherit = |key: &str| {
        let r = resolved(&|k| {
            k.options.remove(key);
        });
        inherits(r.as_ref().and_then(|r| r.options.get(key)))
    };
    fields.extend(option_fields(
        p,
        &n("options"),
        &own.options,
        values,
        &inherit,
        errors,
    ));
    fields
}

fn provider_choice(name: &str, label: &str, inherit: String, current: &str) -> FormField {
    FormField::new(
        name,
        label,
        select(Some(inherit), &provider::ids(), current),
    )
}

/// The settings page's sections: which provider plan and review runs use,
/// `afk.max_plan_rounds`, and each provider's plan and review defaults.
pub fn settings_sections(
    s: &Settings,
    form: Option<&Form>,
    errors: &mut FormErrors,
) -> Vec<Section> {
    let values = |name: &str, stored: Option<&str>| match form {
        Some(f) => f.get(name).unwrap_or("").to_owned(),
        None => stored.unwrap_or("").to_owned(),
    };
    let (lo, hi) = settings::MAX_PLAN_ROUNDS;
    let mut out = vec![Section {
        title: "Plan and review runs".into(),
        intro: "A plan run writes a plan for an issue, a review run reviews the work; each may \
                run on another provider than its repo's."
            .into(),
        fields: vec![
            provider_choice(
                "plan_provider",
                "Provider of plan runs",
                "same as each repo's provider".into(),
                &values("plan_provider", s.kinds.plan.map(|p| p.as_str())),
            )
            .error_from(errors),
            provider_choice(
                "review_provider",
                "Provider of review runs",
                "same as each repo's provider".into(),
                &values("review_provider", s.kinds.review.map(|p| p.as_str())),
            )
            .error_from(errors),
            FormField::new(
                "afk.max_plan_rounds",
                "Rounds of plan and review",
                Kind::Number {
                    value: values("afk.max_plan_rounds", Some(&s.afk.max_plan_rounds.to_string())),
                    min: lo,
                    max: hi,
                },
            )
            .help("A plan sent back by its review is written again this many times, the first round included.")
            .error_from(errors),
        ],
    }];
    for id in ProviderId::all() {
        let p = id.provider();
        let d = s.provider(id);
        let pre = format!("providers.{}.", p.id());
        let mut fields = Vec::new();
        for (kind, _) in OWN_KINDS {
            let resolved = |change: &dyn Fn(&mut KindDefaults)| {
                let mut without = d.clone();
                without.kind_mut(kind).map(change);
                Some(resolve(
                    id,
                    kind,
                    &without,
                    &Defaults::default(),
                    &Request::default(),
                ))
            };
            let own = d.kind(kind).cloned().unwrap_or_default();
            fields.extend(kind_fields(p, &pre, kind, &own, &values, &resolved, errors));
        }
        out.push(Section {
            title: format!("{}: plan and review defaults", p.name()),
            intro: "What plan and review runs on this provider use. An empty choice inherits the \
                    value it names (the AFK defaults, unless set here)."
                .into(),
            fields,
        });
    }
    out
}

/// Every option key any provider declares.
fn all_option_keys() -> Vec<&'static str> {
    let mut keys: Vec<&str> = provider::all()
        .iter()
        .flat_map(|p| p.spawn_options().iter().map(|o| o.key))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// What a posted form changes of one kind's own defaults (`{pre}{kind}_…`);
/// only the fields the form shows.
pub fn kind_patch(form: &Form, pre: &str, name: &str) -> KindPatch {
    let n = |f: &str| format!("{pre}{name}_{f}");
    // A field the form does not show is kept.
    let shown = |f: &str| {
        if form.has(f) {
            change(form, f)
        } else {
            Change::Keep
        }
    };
    KindPatch {
        model_default: shown(&n("model_default")),
        effort_default: shown(&n("effort_default")),
        options: all_option_keys()
            .into_iter()
            .filter_map(|key| {
                let field = format!("{}.{key}", n("options"));
                form.has(&field)
                    .then(|| (key.to_owned(), change(form, &field)))
            })
            .collect(),
    }
}

/// The settings page's posted plan and review fields into `patch`.
pub fn settings_patch(form: &Form, patch: &mut SettingsPatch, errs: &mut ValueErrors) {
    if form.has("plan_provider") {
        patch.kinds.plan_provider = change(form, "plan_provider");
        patch.kinds.review_provider = change(form, "review_provider");
    }
    if form.has("afk.max_plan_rounds") {
        patch.afk.max_plan_rounds = number(form, "afk.max_plan_rounds", errs);
    }
    for (id, d) in patch.providers.iter_mut() {
        let pre = format!("providers.{id}.");
        d.plan = kind_patch(form, &pre, "plan");
        d.review = kind_patch(form, &pre, "review");
    }
}

/// A repo page's section of its plan and review runs: each kind's
/// provider, then its own defaults for the provider they are written for.
pub fn repo_section(
    repo: &Repo,
    s: &Settings,
    form: Option<&Form>,
    errors: &mut FormErrors,
) -> Section {
    let values = |name: &str, stored: Option<&str>| match form {
        Some(f) => f.get(name).unwrap_or("").to_owned(),
        None => stored.unwrap_or("").to_owned(),
    };
    let mut fields = Vec::new();
    for (kind, name) in OWN_KINDS {
        let Ok(layer) = repo.layer_provider(kind) else {
            continue;
        };
        let field = format!("{name}_provider");
        let fallback = s.kinds.get(kind).map_or_else(
            || format!("same as the repo's provider: {}", repo.provider),
            |g| format!("same as default: {g} (the global settings)"),
        );
        fields.push(
            provider_choice(
                &field,
                &format!("Provider of {name} runs"),
                fallback,
                &values(&field, repo.own_provider(kind)),
            )
            .help(format!(
                "The {name} model, effort and options below are {layer}'s; changing the provider \
                 reports those that do not fit."
            ))
            .error_from(errors),
        );
        let resolved = |change: &dyn Fn(&mut KindDefaults)| {
            let mut without = repo.clone();
            without.defaults.kind_mut(kind).map(change);
            resolve_kind(&without, s, kind, None).ok()
        };
        let own = repo.defaults.kind(kind).cloned().unwrap_or_default();
        fields.extend(kind_fields(
            layer.provider(),
            "",
            kind,
            &own,
            &values,
            &resolved,
            errors,
        ));
    }
    Section {
        title: "Plan and review runs".into(),
        intro: "A plan run writes a plan for an issue, a review run reviews the work. An empty \
                choice inherits the value it names (the repo's and the global AFK defaults, \
                unless set here or globally)."
            .into(),
        fields,
    }
}

/// A repo form's posted plan and review fields into `patch`.
pub fn repo_patch(form: &Form, patch: &mut crate::repo::RepoPatch) {
    if !form.has("plan_provider") {
        return;
    }
    patch.plan_provider = change(form, "plan_provider");
    patch.review_provider = change(form, "review_provider");
    patch.defaults.plan = kind_patch(form, "", "plan");
    patch.defaults.review = kind_patch(form, "", "review");
}
