use serde_json::json;

use super::*;
use crate::domain::Change;
use crate::repo::RepoPatch;

fn repo() -> Repo {
    crate::repo::create(&RepoPatch {
        name: Change::Set("r".into()),
        path: Change::Set("/tmp/r".into()),
        ..RepoPatch::default()
    })
    .unwrap()
}

fn parse(repo: &Repo, settings: &Settings, v: serde_json::Value) -> Result<IssueLayer, Invalid> {
    IssueLayer::parse(
        "knobs",
        &Input::Json(v.as_object().unwrap().clone()),
        KnobContext { repo, settings },
    )
}

#[test]
fn an_issue_sets_its_model_effort_options_budgets_and_knobs() {
    let r = repo();
    let s = Settings::default();
    let l = parse(
        &r,
        &s,
        json!({"model": "OPUS", "effort": "high", "ultracode": true, "max_tokens": 5000,
               "max_cost_usd": 1.5, "run_timeout_minutes": 20, "changeScope": "surgical"}),
    )
    .unwrap();
    assert_eq!(l.model.as_deref(), Some("opus"));
    assert_eq!(l.options["ultracode"], "true");
    assert_eq!(l.budget.max_cost_nano_usd, Some(1_500_000_000));
    assert_eq!(l.budget.run_timeout_minutes, Some(20));
    assert_eq!(l.knobs["changeScope"], knob::Value::Text("surgical".into()));
    // Stored and read back, it is the same layer.
    let again = parse(&r, &s, serde_json::Value::Object(l.to_json())).unwrap();
    assert_eq!(again, l);
}

#[test]
fn an_issue_never_widens_what_the_repo_allows() {
    let mut r = repo();
    r.allowed_models = vec!["sonnet".into()];
    r.budget.max_tokens = Some(10_000);
    let mut s = Settings::default();
    s.afk.run_timeout_minutes = 30;
    s.knobs
        .insert("writes".into(), knob::Value::List(vec!["src/**".into()]));
    let e = parse(
        &r,
        &s,
        json!({"model": "opus", "max_tokens": 20000, "run_timeout_minutes": 45,
               "writes": ["lib/**"]}),
    )
    .unwrap_err();
    let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "knobs.model",
            "knobs.max_tokens",
            "knobs.run_timeout_minutes",
            "knobs.writes"
        ]
    );
    assert!(
        e.0[0].message.contains("allowed: sonnet"),
        "{}",
        e.0[0].message
    );
    assert!(e.0[1].message.contains("(10000)"), "{}", e.0[1].message);
    assert!(e.0[3].message.contains("src/**"), "{}", e.0[3].message);
    // Within: fine.
    let ok = parse(
        &r,
        &s,
        json!({"model": "sonnet", "max_tokens": 9000, "writes": ["src/api/**"]}),
    )
    .unwrap();
    assert_eq!(ok.budget.max_tokens, Some(9000));
}

#[test]
fn unknown_keys_name_every_known_one() {
    let r = repo();
    let e = parse(&r, &Settings::default(), json!({"sandbox": "read-only"})).unwrap_err();
    let m = &e.0[0].message;
    assert!(m.starts_with("unknown key 'sandbox'"), "{m}");
    for k in [
        "changeScope",
        "writes",
        "model",
        "max_cost_usd",
        "ultracode",
        "permission_mode",
    ] {
        assert!(m.contains(k), "{k} in {m}");
    }
}

#[test]
fn text_lines_read_as_their_types() {
    let r = repo();
    let l = IssueLayer::parse(
        "lab",
        &Input::Text(vec![
            ("max_cost_usd".into(), "$2.50".into()),
            ("ultracode".into(), "TRUE".into()),
            ("writes".into(), "src/**, docs/**".into()),
        ]),
        KnobContext {
            repo: &r,
            settings: &Settings::default(),
        },
    )
    .unwrap();
    assert_eq!(l.budget.max_cost_nano_usd, Some(2_500_000_000));
    assert_eq!(l.options["ultracode"], "true");
    assert_eq!(
        l.knobs["writes"],
        knob::Value::List(vec!["src/**".into(), "docs/**".into()])
    );
}

#[test]
fn the_issue_and_the_repo_file_sit_where_they_belong() {
    let mut r = repo();
    let g = crate::domain::Defaults::default();
    r.config.file = Some(RepoFile {
        model: Some("haiku".into()),
        effort: Some("low".into()),
        ..RepoFile::default()
    });
    let res = super::super::resolve_afk(&r, &g, None).unwrap();
    assert_eq!(
        (res.model.value.as_str(), res.model.layer),
        ("haiku", Layer::RepoFile)
    );
    // The operator's repo AFK default wins over the file.
    r.defaults.afk_model_default = Some("sonnet".into());
    let issue = IssueLayer {
        effort: Some("max".into()),
        ..IssueLayer::default()
    };
    let res = super::super::resolve_afk(&r, &g, Some(&issue)).unwrap();
    assert_eq!(
        (res.model.value.as_str(), res.model.layer),
        ("sonnet", Layer::RepoAfk)
    );
    assert_eq!(
        (res.effort.value.as_str(), res.effort.layer),
        ("max", Layer::Issue)
    );
}

#[test]
fn budgets_only_lower() {
    let b = crate::repo::Budget {
        max_tokens: None,
        max_cost_nano_usd: Some(100),
        run_timeout_minutes: 60,
    };
    let i = IssueBudget {
        max_tokens: Some(5),
        max_cost_nano_usd: Some(200),
        run_timeout_minutes: Some(10),
    };
    let l = b.lowered(&i);
    assert_eq!(l.max_tokens, Some(5));
    assert_eq!(
        l.max_cost_nano_usd,
        Some(100),
        "a cap that fell since stays the lower"
    );
    assert_eq!(l.run_timeout_minutes, 10);
}

/// `plan` and `review` are oversight: an issue may ask for more (a plan a
/// person approves, a review run) than its repo, never for less.
#[test]
fn an_issue_raises_oversight_and_never_lowers_it() {
    let mut r = repo();
    let s = Settings::default();
    let up = parse(&r, &s, json!({"plan": "on", "review": "on"})).unwrap();
    assert_eq!(up.knobs["plan"], knob::Value::Text("on".into()));
    r.knobs
        .insert("plan".into(), knob::Value::Text("on".into()));
    r.knobs
        .insert("review".into(), knob::Value::Text("on".into()));
    let e = parse(&r, &s, json!({"plan": "auto", "review": "off"})).unwrap_err();
    let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["knobs.plan", "knobs.review"]);
    assert!(
        e.0[0]
            .message
            .contains("may only raise the repo's plan (on), never lower it"),
        "{}",
        e.0[0].message
    );
    let bad = parse(&r, &s, json!({"plan": "sometimes"})).unwrap_err();
    assert!(bad.0[0].message.contains("off"), "{}", bad.0[0].message);
}
