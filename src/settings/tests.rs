use super::*;

fn set(s: &str) -> Change<String> {
    Change::Set(s.to_owned())
}

fn id(s: &str) -> ProviderId {
    s.parse().unwrap()
}

fn patch_provider(id: &str, p: DefaultsPatch) -> SettingsPatch {
    SettingsPatch {
        providers: [(id.to_owned(), p)].into(),
        ..SettingsPatch::default()
    }
}

#[test]
fn sets_clears_and_canonicalises() {
    let s = apply(
        &Settings::default(),
        &patch_provider(
            "claude-code",
            DefaultsPatch {
                model_default: set("Opus"),
                afk_effort_default: set("MAX"),
                afk_options: [("ultracode".to_owned(), set("True"))].into(),
                ..DefaultsPatch::default()
            },
        ),
    )
    .unwrap();
    let d = s.provider(id("claude-code"));
    assert_eq!(d.model_default.as_deref(), Some("opus"));
    assert_eq!(d.afk_effort_default.as_deref(), Some("max"));
    assert_eq!(d.afk_options["ultracode"], "true");

    // "" and Clear both inherit again; other fields are left alone.
    let s2 = apply(
        &s,
        &patch_provider(
            "claude-code",
            DefaultsPatch {
                model_default: Change::Clear,
                afk_effort_default: set(""),
                afk_options: [("ultracode".to_owned(), Change::Clear)].into(),
                ..DefaultsPatch::default()
            },
        ),
    )
    .unwrap();
    assert_eq!(s2.provider(id("claude-code")), Defaults::default());
}

#[test]
fn options_merge_key_by_key() {
    let s = apply(
        &Settings::default(),
        &patch_provider(
            "claude-code",
            DefaultsPatch {
                afk_options: [("ultracode".to_owned(), set("true"))].into(),
                ..DefaultsPatch::default()
            },
        ),
    )
    .unwrap();
    let s = apply(
        &s,
        &patch_provider(
            "claude-code",
            DefaultsPatch {
                afk_options: [("permission_mode".to_owned(), set("dontAsk"))].into(),
                ..DefaultsPatch::default()
            },
        ),
    )
    .unwrap();
    let o = &s.provider(id("claude-code")).afk_options;
    assert_eq!(o.len(), 2);
    assert_eq!(o["ultracode"], "true");
    assert_eq!(o["permission_mode"], "dontAsk");
}

#[test]
fn one_bad_field_rejects_the_whole_change_and_names_every_bad_field() {
    let before = Settings::default();
    let e = apply(
        &before,
        &SettingsPatch {
            providers: [
                (
                    "claude-code".to_owned(),
                    DefaultsPatch {
                        model_default: set("opus"),
                        effort_default: set("turbo"),
                        afk_options: [("nope".to_owned(), set("1"))].into(),
                        ..DefaultsPatch::default()
                    },
                ),
                ("gemini".to_owned(), DefaultsPatch::default()),
            ]
            .into(),
            afk: AfkPatch {
                tick_seconds: Change::Set(0),
                ..AfkPatch::default()
            },
            ..SettingsPatch::default()
        },
    )
    .unwrap_err();
    let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "providers.claude-code.effort_default",
            "providers.claude-code.afk_options.nope",
            "providers.gemini",
            "afk.tick_seconds"
        ]
    );
}

#[test]
fn afk_limits_set_and_reset() {
    let s = apply(
        &Settings::default(),
        &SettingsPatch {
            afk: AfkPatch {
                max_concurrent: Change::Set(7),
                tick_seconds: Change::Set(5),
                run_timeout_minutes: Change::Set(90),
                max_rounds: Change::Set(5),
                max_plan_rounds: Change::Set(4),
                max_attempts: Change::Set(1),
                max_tokens: Change::Set(2_000_000),
                max_cost_nano_usd: Change::Set(2_500_000_000),
                memory_per_run_mb: Change::Set(0),
            },
            ..SettingsPatch::default()
        },
    )
    .unwrap();
    assert_eq!(
        s.afk,
        AfkLimits {
            max_concurrent: 7,
            tick_seconds: 5,
            run_timeout_minutes: 90,
            max_rounds: 5,
            max_plan_rounds: 4,
            max_attempts: 1,
            max_tokens: Some(2_000_000),
            max_cost_nano_usd: Some(2_500_000_000),
            memory_per_run_mb: 0,
        }
    );
    // Budgets out of range are refused by name, in dollars for the cost.
    let e = apply(
        &s,
        &SettingsPatch {
            afk: AfkPatch {
                max_cost_nano_usd: Change::Set(-1),
                max_rounds: Change::Set(0),
                ..AfkPatch::default()
            },
            ..SettingsPatch::default()
        },
    )
    .unwrap_err();
    let fields: Vec<_> =
        e.0.iter()
            .map(|f| (f.field.as_str(), f.message.as_str()))
            .collect();
    assert_eq!(
        fields,
        [
            ("afk.max_rounds", "must be a whole number from 1 to 20"),
            (
                "afk.max_cost_usd",
                "must be an amount of US dollars from 0.01 to 1000000"
            ),
        ]
    );
    let s = apply(
        &s,
        &SettingsPatch {
            afk: AfkPatch {
                max_concurrent: Change::Clear,
                ..AfkPatch::default()
            },
            ..SettingsPatch::default()
        },
    )
    .unwrap();
    assert_eq!(s.afk.max_concurrent, AfkLimits::default().max_concurrent);
    assert_eq!(s.afk.tick_seconds, 5);
}

#[test]
fn clearing_an_undeclared_key_is_an_error_unless_it_is_stored() {
    let e = apply(
        &Settings::default(),
        &patch_provider(
            "codex",
            DefaultsPatch {
                afk_options: [("ultracode".to_owned(), Change::Clear)].into(),
                ..DefaultsPatch::default()
            },
        ),
    )
    .unwrap_err();
    assert_eq!(e.0[0].field, "providers.codex.afk_options.ultracode");

    let mut stored = Settings::default();
    stored.providers.insert(
        id("codex"),
        Defaults {
            afk_options: [("ultracode".to_owned(), "true".to_owned())].into(),
            ..Defaults::default()
        },
    );
    let s = apply(
        &stored,
        &patch_provider(
            "codex",
            DefaultsPatch {
                afk_options: [("ultracode".to_owned(), Change::Clear)].into(),
                ..DefaultsPatch::default()
            },
        ),
    )
    .unwrap();
    assert!(s.provider(id("codex")).afk_options.is_empty());
}

#[test]
fn dollars_a_hair_out_of_range_stay_out() {
    let (lo, hi) = crate::settings::MAX_COST_NANO_USD;
    assert_eq!(usd_to_nano(2.5), 2_500_000_000);
    assert_eq!(usd_to_nano(0.01), lo);
    assert!(usd_to_nano(0.009_999_999_999_9) < lo);
    assert!(usd_to_nano(1_000_000.000_000_1) > hi);
    assert!(usd_to_nano(-1.0) < 0);
}
