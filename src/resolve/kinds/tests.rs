use std::collections::BTreeMap;

use super::*;
use crate::domain::{Change, KindDefaults, Layer, Sourced};
use crate::provider::Provider;
use crate::repo::RepoPatch;
use crate::resolve::{Request, resolve};

fn id(s: &str) -> ProviderId {
    s.parse().unwrap()
}

/// Which of a plan or review run's six layers are set.
#[derive(Clone, Copy, Debug)]
struct Combo {
    repo_own: bool,
    global_own: bool,
    repo_afk: bool,
    global_afk: bool,
    repo_base: bool,
    global_base: bool,
}

impl Combo {
    fn all() -> impl Iterator<Item = Combo> {
        (0..64u8).map(|bits| Combo {
            repo_own: bits & 1 != 0,
            global_own: bits & 2 != 0,
            repo_afk: bits & 4 != 0,
            global_afk: bits & 8 != 0,
            repo_base: bits & 16 != 0,
            global_base: bits & 32 != 0,
        })
    }

    /// ADR 32's chain, written out: `repo.plan ?? global.plan ?? repo.afk
    /// ?? global.afk ?? repo.base ?? global.base ?? provider default`
    /// (review likewise).
    fn expected(self, kind: RunKind) -> Layer {
        let (repo_own, global_own) = match kind {
            RunKind::Plan => (Layer::RepoPlan, Layer::GlobalPlan),
            RunKind::Review => (Layer::RepoReview, Layer::GlobalReview),
            _ => unreachable!(),
        };
        [
            (self.repo_own, repo_own),
            (self.global_own, global_own),
            (self.repo_afk, Layer::RepoAfk),
            (self.global_afk, Layer::GlobalAfk),
            (self.repo_base, Layer::RepoBase),
            (self.global_base, Layer::GlobalBase),
        ]
        .iter()
        .find(|(set, _)| *set)
        .map_or(Layer::ProviderDefault, |(_, l)| *l)
    }
}

fn index(l: Layer) -> usize {
    match l {
        Layer::RepoPlan | Layer::RepoReview => 0,
        Layer::GlobalPlan | Layer::GlobalReview => 1,
        Layer::RepoAfk => 2,
        Layer::GlobalAfk => 3,
        Layer::RepoBase => 4,
        Layer::GlobalBase => 5,
        Layer::ProviderDefault => 6,
        other => unreachable!("{other}"),
    }
}

fn values(p: &dyn Provider, model: bool) -> Vec<String> {
    let (c, default) = if model {
        (p.models(), p.default_model())
    } else {
        (p.efforts(), p.default_effort())
    };
    let others: Vec<&str> = c.iter().copied().filter(|v| *v != default).collect();
    let mut v: Vec<String> = (0..6)
        .map(|i| others[i % others.len()].to_owned())
        .collect();
    v.push(default.to_owned());
    v
}

fn build(c: Combo, kind: RunKind, v: &[String], model: bool) -> (Defaults, Defaults) {
    let on = |b: bool, i: usize| b.then(|| v[i].clone());
    let (mut global, mut repo) = (Defaults::default(), Defaults::default());
    let own = |d: &mut Defaults| d.kind_mut(kind).cloned().unwrap();
    let (mut repo_own, mut global_own) = (own(&mut repo), own(&mut global));
    if model {
        repo_own.model_default = on(c.repo_own, 0);
        global_own.model_default = on(c.global_own, 1);
        repo.afk_model_default = on(c.repo_afk, 2);
        global.afk_model_default = on(c.global_afk, 3);
        repo.model_default = on(c.repo_base, 4);
        global.model_default = on(c.global_base, 5);
    } else {
        repo_own.effort_default = on(c.repo_own, 0);
        global_own.effort_default = on(c.global_own, 1);
        repo.afk_effort_default = on(c.repo_afk, 2);
        global.afk_effort_default = on(c.global_afk, 3);
        repo.effort_default = on(c.repo_base, 4);
        global.effort_default = on(c.global_base, 5);
    }
    *repo.kind_mut(kind).unwrap() = repo_own;
    *global.kind_mut(kind).unwrap() = global_own;
    (global, repo)
}

#[test]
fn plan_and_review_follow_their_chain_for_every_layer_combination() {
    let mut checked = 0;
    for pid in ProviderId::all() {
        let p = pid.provider();
        for model in [true, false] {
            let v = values(p, model);
            for c in Combo::all() {
                for kind in [RunKind::Plan, RunKind::Review] {
                    let (global, repo) = build(c, kind, &v, model);
                    let r = resolve(pid, kind, &global, &repo, &Request::default());
                    let got = if model { &r.model } else { &r.effort };
                    let want = c.expected(kind);
                    assert_eq!(got.layer, want, "{pid} {kind} {c:?} model={model}");
                    assert_eq!(got.value, v[index(want)], "{pid} {kind} {c:?}");
                    checked += 1;
                }
            }
        }
    }
    // 2 providers x 2 values x 64 combinations x 2 kinds
    assert_eq!(checked, 512);
}

#[test]
fn the_other_kind_s_own_layer_never_applies() {
    let pid = id("claude-code");
    let repo = Defaults {
        review: KindDefaults {
            model_default: Some("haiku".into()),
            ..KindDefaults::default()
        },
        ..Defaults::default()
    };
    let plan = resolve(
        pid,
        RunKind::Plan,
        &Defaults::default(),
        &repo,
        &Request::default(),
    );
    assert_eq!(plan.model.layer, Layer::ProviderDefault);
    let afk = resolve(
        pid,
        RunKind::Afk,
        &Defaults::default(),
        &repo,
        &Request::default(),
    );
    assert_eq!(afk.model.layer, Layer::ProviderDefault);
}

fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn options_go_key_by_key_through_the_kind_then_afk_layers() {
    let pid = id("claude-code");
    for kind in [RunKind::Plan, RunKind::Review] {
        // (repo own, global own, repo afk, global afk) → the layer that wins.
        let (own_repo, own_global) = match kind {
            RunKind::Plan => (Layer::RepoPlan, Layer::GlobalPlan),
            _ => (Layer::RepoReview, Layer::GlobalReview),
        };
        for bits in 0..16u8 {
            let set = |i: u8| bits & (1 << i) != 0;
            let mut repo = Defaults::default();
            let mut global = Defaults::default();
            let value = |i: u8| if i.is_multiple_of(2) { "false" } else { "true" };
            if set(0) {
                repo.kind_mut(kind).unwrap().options = opts(&[("ultracode", value(0))]);
            }
            if set(1) {
                global.kind_mut(kind).unwrap().options = opts(&[("ultracode", value(1))]);
            }
            if set(2) {
                repo.afk_options = opts(&[("ultracode", value(2))]);
            }
            if set(3) {
                global.afk_options = opts(&[("ultracode", value(3))]);
            }
            let want = [
                (set(0), own_repo, value(0)),
                (set(1), own_global, value(1)),
                (set(2), Layer::RepoAfk, value(2)),
                (set(3), Layer::GlobalAfk, value(3)),
            ]
            .into_iter()
            .find(|(s, _, _)| *s)
            .map_or(
                Sourced {
                    value: "false".into(),
                    layer: Layer::ProviderDefault,
                },
                |(_, layer, v)| Sourced {
                    value: v.into(),
                    layer,
                },
            );
            let r = resolve(pid, kind, &global, &repo, &Request::default());
            assert_eq!(r.options["ultracode"], want, "{kind} bits={bits:04b}");
        }
    }
}

fn repo_on(provider: &str, patch: RepoPatch) -> Repo {
    crate::repo::create(&RepoPatch {
        name: Change::Set("r".into()),
        path: Change::Set("/tmp/r".into()),
        provider: Change::Set(provider.into()),
        ..patch
    })
    .unwrap()
}

fn settings_with(providers: &[(&str, Defaults)]) -> Settings {
    let mut s = Settings::default();
    for (p, d) in providers {
        s.providers.insert(id(p), d.clone());
    }
    s
}

#[test]
fn a_claude_code_repo_has_codex_review_with_the_codex_global_review_defaults() {
    let mut patch = RepoPatch {
        review_provider: Change::Set("codex".into()),
        ..RepoPatch::default()
    };
    // The repo's own layers for claude-code, and its review ones for codex.
    patch.defaults.afk_model_default = Change::Set("opus".into());
    patch.defaults.model_default = Change::Set("sonnet".into());
    patch.defaults.review.effort_default = Change::Set("low".into());
    let repo = repo_on("claude-code", patch);
    let codex = Defaults {
        model_default: Some("gpt-6-sol".into()),
        review: KindDefaults {
            model_default: Some("gpt-6-luna".into()),
            ..KindDefaults::default()
        },
        ..Defaults::default()
    };
    let claude = Defaults {
        review: KindDefaults {
            model_default: Some("haiku".into()),
            ..KindDefaults::default()
        },
        ..Defaults::default()
    };
    let s = settings_with(&[("codex", codex), ("claude-code", claude)]);

    let review = resolve_kind(&repo, &s, RunKind::Review, None).unwrap();
    assert_eq!(review.provider, id("codex"));
    // The codex global review default, not the repo's claude-code layers.
    assert_eq!(
        review.model,
        Sourced {
            value: "gpt-6-luna".into(),
            layer: Layer::GlobalReview
        }
    );
    assert_eq!(
        review.effort,
        Sourced {
            value: "low".into(),
            layer: Layer::RepoReview
        }
    );
    assert!(review.options.keys().all(|k| k != "ultracode"));

    // The work and the plan stay on the repo's provider and layers.
    let afk = resolve_kind(&repo, &s, RunKind::Afk, None).unwrap();
    assert_eq!(afk.provider, id("claude-code"));
    assert_eq!(afk.model.value, "opus");
    let plan = resolve_kind(&repo, &s, RunKind::Plan, None).unwrap();
    assert_eq!(plan.provider, id("claude-code"));
    assert_eq!(
        (plan.model.value.as_str(), plan.model.layer),
        ("opus", Layer::RepoAfk)
    );
}

#[test]
fn the_global_kind_provider_applies_unless_the_repo_names_one() {
    let repo = repo_on("claude-code", RepoPatch::default());
    let mut s = settings_with(&[]);
    s.kinds.plan = Some(id("codex"));
    let plan = resolve_kind(&repo, &s, RunKind::Plan, None).unwrap();
    assert_eq!(plan.provider, id("codex"));
    assert_eq!(plan.model.layer, Layer::ProviderDefault);
    assert_eq!(plan.model.value, id("codex").provider().default_model());
    // Review follows the repo's provider.
    let review = resolve_kind(&repo, &s, RunKind::Review, None).unwrap();
    assert_eq!(review.provider, id("claude-code"));

    let own = repo_on(
        "claude-code",
        RepoPatch {
            plan_provider: Change::Set("claude-code".into()),
            ..RepoPatch::default()
        },
    );
    assert_eq!(
        resolve_kind(&own, &s, RunKind::Plan, None)
            .unwrap()
            .provider,
        id("claude-code")
    );
}

#[test]
fn a_repo_s_plan_values_are_checked_against_its_plan_provider() {
    let mut patch = RepoPatch {
        plan_provider: Change::Set("codex".into()),
        ..RepoPatch::default()
    };
    patch.defaults.plan.model_default = Change::Set("opus".into());
    let e = crate::repo::create(&RepoPatch {
        name: Change::Set("r".into()),
        path: Change::Set("/tmp/r".into()),
        ..patch
    })
    .unwrap_err();
    assert!(e.0.iter().any(|f| f.field == "plan_model_default"), "{e:?}");
    let e = crate::repo::create(&RepoPatch {
        name: Change::Set("r".into()),
        path: Change::Set("/tmp/r".into()),
        review_provider: Change::Set("nope".into()),
        ..RepoPatch::default()
    })
    .unwrap_err();
    assert_eq!(e.0[0].field, "review_provider");
}

#[test]
fn changing_a_kind_s_provider_reports_kept_values_that_no_longer_fit() {
    let mut patch = RepoPatch::default();
    patch.defaults.review.model_default = Change::Set("opus".into());
    let repo = repo_on("claude-code", patch);
    let e = crate::repo::apply(
        &repo,
        &RepoPatch {
            review_provider: Change::Set("codex".into()),
            ..RepoPatch::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.0[0].field, "review_model_default");
    assert!(e.0[0].message.contains("new provider codex"), "{e:?}");
    // Cleared in the same request: accepted.
    let mut fix = RepoPatch {
        review_provider: Change::Set("codex".into()),
        ..RepoPatch::default()
    };
    fix.defaults.review.model_default = Change::Clear;
    let next = crate::repo::apply(&repo, &fix).unwrap();
    assert_eq!(next.review_provider.as_deref(), Some("codex"));
    assert_eq!(next.defaults.review.model_default, None);
}

#[test]
fn the_issue_layer_applies_to_the_work_run_only() {
    let repo = repo_on("claude-code", RepoPatch::default());
    let s = Settings::default();
    let issue = crate::resolve::IssueLayer {
        model: Some("opus".into()),
        ..Default::default()
    };
    let afk = resolve_kind(&repo, &s, RunKind::Afk, Some(&issue)).unwrap();
    assert_eq!(afk.model.layer, Layer::Issue);
    for kind in [RunKind::Plan, RunKind::Review] {
        let r = resolve_kind(&repo, &s, kind, Some(&issue)).unwrap();
        assert_eq!(r.model.layer, Layer::ProviderDefault, "{kind}");
    }
}
