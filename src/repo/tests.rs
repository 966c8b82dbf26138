use super::*;

fn set<T>(v: T) -> Change<T> {
    Change::Set(v)
}

fn new_repo() -> Repo {
    create(&RepoPatch {
        name: set("demo".into()),
        path: set("/srv/demo".into()),
        ..RepoPatch::default()
    })
    .unwrap()
}

#[test]
fn create_fills_defaults() {
    let r = new_repo();
    assert_eq!(r.default_branch, "main");
    assert_eq!(r.provider, "claude-code");
    assert_eq!(r.afk_label, "ready-for-agent");
    assert_eq!(r.afk_max_concurrent, 1);
    assert!(!r.afk_enabled);
    assert_eq!(r.source, RepoSource::Path("/srv/demo".into()));
}

#[test]
fn create_requires_a_name_and_a_source() {
    let e = create(&RepoPatch::default()).unwrap_err();
    let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["name", "path"]);
    let e = create(&RepoPatch {
        name: set("x".into()),
        path: set("/a".into()),
        url: set("https://h/x.git".into()),
        ..RepoPatch::default()
    })
    .unwrap_err();
    assert_eq!(e.0[0].field, "url");
}

#[test]
fn setting_the_url_replaces_the_path() {
    let r = apply(
        &new_repo(),
        &RepoPatch {
            url: set("https://h/x.git".into()),
            ..RepoPatch::default()
        },
    )
    .unwrap();
    assert_eq!(r.source, RepoSource::Url("https://h/x.git".into()));
    let e = apply(
        &r,
        &RepoPatch {
            url: Change::Clear,
            ..RepoPatch::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.0[0].field, "url");
}

#[test]
fn a_provider_change_reports_stored_values_that_do_not_fit() {
    let r = apply(
        &new_repo(),
        &RepoPatch {
            defaults: DefaultsPatch {
                model_default: set("opus".into()),
                afk_effort_default: set("max".into()),
                afk_options: [("ultracode".to_owned(), set("true".into()))].into(),
                ..DefaultsPatch::default()
            },
            ..RepoPatch::default()
        },
    )
    .unwrap();
    let e = apply(
        &r,
        &RepoPatch {
            provider: set("codex".into()),
            ..RepoPatch::default()
        },
    )
    .unwrap_err();
    let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "model_default",
            "afk_effort_default",
            "afk_options.ultracode"
        ]
    );
    assert!(
        e.0[0]
            .message
            .contains("does not fit the new provider codex"),
        "{}",
        e.0[0].message
    );

    // Clearing or replacing them in the same request makes the change fit.
    let ok = apply(
        &r,
        &RepoPatch {
            provider: set("codex".into()),
            defaults: DefaultsPatch {
                model_default: set("gpt-6-sol".into()),
                afk_effort_default: Change::Clear,
                afk_options: [("ultracode".to_owned(), Change::Clear)].into(),
                ..DefaultsPatch::default()
            },
            ..RepoPatch::default()
        },
    )
    .unwrap();
    assert_eq!(ok.provider, "codex");
    assert_eq!(ok.defaults.model_default.as_deref(), Some("gpt-6-sol"));
    assert!(ok.defaults.afk_options.is_empty());
}

#[test]
fn fields_that_cannot_inherit_reset_to_their_defaults() {
    let r = apply(
        &new_repo(),
        &RepoPatch {
            default_branch: set("dev".into()),
            afk_enabled: set(true),
            afk_label: set("agent".into()),
            afk_max_concurrent: set(3),
            ..RepoPatch::default()
        },
    )
    .unwrap();
    assert_eq!(
        (
            r.default_branch.as_str(),
            r.afk_enabled,
            r.afk_label.as_str(),
            r.afk_max_concurrent
        ),
        ("dev", true, "agent", 3)
    );
    let r = apply(
        &r,
        &RepoPatch {
            default_branch: Change::Clear,
            afk_enabled: Change::Clear,
            afk_label: Change::Clear,
            afk_max_concurrent: Change::Clear,
            ..RepoPatch::default()
        },
    )
    .unwrap();
    assert_eq!(
        r,
        Repo {
            updated_at: r.updated_at,
            ..new_repo()
        }
    );
}

#[test]
fn bad_values_are_named() {
    let e = apply(
        &new_repo(),
        &RepoPatch {
            name: set("12".into()),
            default_branch: set("a..b".into()),
            afk_max_concurrent: set(0),
            afk_label: set("a,b".into()),
            ..RepoPatch::default()
        },
    )
    .unwrap_err();
    let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        ["name", "default_branch", "afk_label", "afk_max_concurrent"]
    );
}
