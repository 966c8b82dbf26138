//! An issue's directives on its page (issue 27): on the built-in tracker a
//! form of every key the issue layer takes (the registered knobs, from the
//! registry, then model, effort, the provider's options and the budgets);
//! on a forge what lab read from the issue's ```` ```lab ```` block, and
//! whether it honours it. Then what the issue's AFK run gets, each value
//! with where it came from.

use super::forms::{Form, FormErrors, FormField, Kind, Section, select};
use super::repos_page::{Shown, knob_rows, resolved_rows};
use crate::domain::Defaults;
use crate::issues::Issue;
use crate::issues::directives::Directives;
use crate::knob::Input;
use crate::repo::Repo;
use crate::resolve::{self, KnobContext};
use crate::settings::Settings;

/// What the page shows of an issue's directives.
pub struct IssueKnobs {
    /// The form (built-in tracker, while no AFK run holds the issue), else
    /// `None`.
    pub form: Option<Section>,
    /// On a forge: the block's lines as lab read them.
    pub read: Vec<(String, String)>,
    /// Whether lab uses them, and if not why.
    pub status: String,
    /// What its AFK run gets (empty when the directives are refused).
    pub gets: Vec<Shown>,
    /// Why the directives are refused, one line each.
    pub refused: Vec<String>,
}

/// The form fields' prefix; the rest of the name is the issue layer's key.
const PREFIX: &str = "knobs.";

/// The page's view of an issue's directives. `form` and `errors` are a
/// refused post's. A `claimed` issue's directives are fixed (its AFK run
/// works with them): no form, and the status says so.
#[allow(clippy::too_many_arguments)]
pub fn view(
    repo: &Repo,
    global: &Defaults,
    settings: &Settings,
    issue: &Issue,
    directives: &Directives,
    claimed: bool,
    form: Option<&Form>,
    errors: &mut FormErrors,
) -> IssueKnobs {
    let builtin = repo.issues.source == crate::repo::issue_source::SourceKind::Builtin;
    let cx = KnobContext { repo, settings };
    let (status, refused) = match directives {
        Directives::None => (
            "None set: its AFK run gets the repo's values.".to_owned(),
            vec![],
        ),
        Directives::Honoured(_) => ("Its AFK run works with these.".to_owned(), vec![]),
        Directives::Ignored { author } => (
            format!(
                "Ignored: its author ({author}) may not write to the repo, so its AFK run gets \
                 the repo's values."
            ),
            vec![],
        ),
        Directives::Invalid(e) => (
            "Refused: no AFK run starts for this issue until they are fixed.".to_owned(),
            e.0.iter()
                .map(|f| format!("{}: {}", f.field, f.message))
                .collect(),
        ),
    };
    let gets = if matches!(directives, Directives::Invalid(_)) {
        Vec::new()
    } else {
        let layer = directives.layer();
        let mut rows = resolve::resolve_afk(repo, global, layer)
            .map(|r| resolved_rows(&r))
            .unwrap_or_default();
        rows.extend(knob_rows(&resolve::run_knobs(cx, layer)));
        let b = resolve::budget(cx, layer.map(|l| &l.budget));
        let none = || "no cap".to_owned();
        rows.push(Shown {
            what: "max tokens".into(),
            value: b.max_tokens.0.map_or_else(none, |n| n.to_string()),
            from: b.max_tokens.1.describe().into(),
        });
        rows.push(Shown {
            what: "max cost".into(),
            value: b
                .max_cost_nano_usd
                .0
                .map_or_else(none, |c| format!("${:.2}", crate::domain::nano_to_usd(c))),
            from: b.max_cost_nano_usd.1.describe().into(),
        });
        rows.push(Shown {
            what: "time limit".into(),
            value: format!("{} minutes", b.run_timeout_minutes.0),
            from: b.run_timeout_minutes.1.describe().into(),
        });
        rows
    };
    let read = if builtin {
        Vec::new()
    } else {
        crate::issues::directives::fenced(&issue.body).unwrap_or_default()
    };
    let status = if claimed && builtin {
        format!("{status} They are fixed while an AFK run holds the issue.")
    } else {
        status
    };
    let form = (builtin && !claimed).then(|| Section {
        title: "Directives".into(),
        intro: "What this issue's AFK run gets instead of the repo's values. It may only narrow \
                what the repo allows; an empty field leaves the repo's value."
            .into(),
        fields: fields(repo, issue, form, errors),
    });
    IssueKnobs {
        form,
        read,
        status,
        gets,
        refused,
    }
}

/// The form: every registered knob, then the issue layer's own keys.
fn fields(
    repo: &Repo,
    issue: &Issue,
    form: Option<&Form>,
    errors: &mut FormErrors,
) -> Vec<FormField> {
    let stored = |key: &str| -> String {
        match issue.knobs.get(key) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v @ serde_json::Value::Array(_)) => {
                serde_json::from_value::<crate::knob::Value>(v.clone())
                    .map(|v| v.shown())
                    .unwrap_or_default()
            }
            Some(v) => v.to_string(),
            None => String::new(),
        }
    };
    let value = |key: &str| match form {
        Some(f) => f.get(&format!("{PREFIX}{key}")).unwrap_or("").to_owned(),
        None => stored(key),
    };
    let knobs: crate::knob::Set = issue
        .knobs
        .iter()
        .filter(|(k, _)| crate::knob::get(k).is_some())
        .filter_map(|(k, v)| Some((k.clone(), serde_json::from_value(v.clone()).ok()?)))
        .collect();
    let mut out = super::knob_form::fields(&knobs, form, &|_| "the repo's".to_owned(), errors);
    let Ok(p) = repo.provider().map(|id| id.provider()) else {
        return out;
    };
    let models: Vec<&str> = if repo.allowed_models.is_empty() {
        p.models().to_vec()
    } else {
        repo.allowed_models.iter().map(String::as_str).collect()
    };
    let name = |k: &str| format!("{PREFIX}{k}");
    out.push(
        FormField::new(
            name("model"),
            "model",
            select(Some("the repo's".into()), &models, &value("model")),
        )
        .error_from(errors),
    );
    out.push(
        FormField::new(
            name("effort"),
            "effort",
            select(Some("the repo's".into()), p.efforts(), &value("effort")),
        )
        .error_from(errors),
    );
    for o in p.spawn_options() {
        out.push(
            FormField::new(
                name(o.key),
                o.label,
                select(Some("the repo's".into()), o.values, &value(o.key)),
            )
            .help(o.description)
            .error_from(errors),
        );
    }
    let (lo, hi) = crate::settings::MAX_TOKENS;
    out.push(
        FormField::new(
            name("max_tokens"),
            "max_tokens",
            Kind::Number {
                value: value("max_tokens"),
                min: lo,
                max: hi,
            },
        )
        .help("Lower than the repo's budget only.")
        .error_from(errors),
    );
    out.push(
        FormField::new(
            name("max_cost_usd"),
            "max_cost_usd",
            Kind::Text {
                value: value("max_cost_usd"),
                placeholder: "the repo's (US dollars)".into(),
            },
        )
        .help("Lower than the repo's budget only.")
        .error_from(errors),
    );
    let (lo, hi) = crate::settings::RUN_TIMEOUT_MINUTES;
    out.push(
        FormField::new(
            name("run_timeout_minutes"),
            "run_timeout_minutes",
            Kind::Number {
                value: value("run_timeout_minutes"),
                min: lo,
                max: hi,
            },
        )
        .help("Lower than the repo's time limit only.")
        .error_from(errors),
    );
    out
}

/// A post's directives: every `knobs.<key>` field, as text.
pub fn input(form: &Form) -> Input {
    let mut fields: Vec<(String, String)> = form
        .0
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(PREFIX)?.to_owned(), v.clone())))
        .filter(|(k, _)| k != "shown")
        .collect();
    fields.sort();
    Input::Text(fields)
}
