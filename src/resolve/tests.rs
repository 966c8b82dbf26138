use super::*;
use crate::provider::{Provider, ProviderId};

fn id(s: &str) -> ProviderId {
    s.parse().unwrap()
}

/// The layers of ADR 2, each with a distinct value so a wrong pick
/// shows up as a wrong value as well as a wrong source.
#[derive(Clone, Copy, Debug)]
struct Combo {
    request: bool,
    repo_afk: bool,
    global_afk: bool,
    repo_base: bool,
    global_base: bool,
}

impl Combo {
    fn all() -> impl Iterator<Item = Combo> {
        (0..32u8).map(|bits| Combo {
            request: bits & 1 != 0,
            repo_afk: bits & 2 != 0,
            global_afk: bits & 4 != 0,
            repo_base: bits & 8 != 0,
            global_base: bits & 16 != 0,
        })
    }

    /// ADR 2's rules, written out as the chains they state.
    fn expected_source(self, kind: RunKind) -> Layer {
        let chain: &[(bool, Layer)] = match kind {
            RunKind::Manual => &[
                (self.request, Layer::Request),
                (self.repo_base, Layer::RepoBase),
                (self.global_base, Layer::GlobalBase),
            ],
            RunKind::Afk => &[
                (self.repo_afk, Layer::RepoAfk),
                (self.global_afk, Layer::GlobalAfk),
                (self.repo_base, Layer::RepoBase),
                (self.global_base, Layer::GlobalBase),
            ],
            // Their own layers: `kinds/tests.rs`.
            RunKind::Plan | RunKind::Review => unreachable!("not a kind of this table"),
        };
        chain
            .iter()
            .find(|(set, _)| *set)
            .map(|(_, s)| *s)
            .unwrap_or(Layer::ProviderDefault)
    }
}

/// Distinct catalog values per layer, so the value also tells the layer.
fn layer_values(p: &dyn Provider, model: bool) -> [String; 6] {
    let (c, default) = if model {
        (p.models(), p.default_model())
    } else {
        (p.efforts(), p.default_effort())
    };
    assert!(c.len() >= 4, "{} catalog too small for the table", p.id());
    // request, repo.afk, global.afk, repo.base, global.base, provider default
    let others: Vec<&str> = c.iter().copied().filter(|v| *v != default).collect();
    // Reuse when the catalog is short: sources are asserted separately.
    let at = |i: usize| others[i % others.len()].to_owned();
    [at(0), at(1), at(2), at(3), at(4), default.to_owned()]
}

fn source_index(s: Layer) -> usize {
    match s {
        Layer::Request => 0,
        Layer::RepoAfk => 1,
        Layer::GlobalAfk => 2,
        Layer::RepoBase => 3,
        Layer::GlobalBase => 4,
        Layer::ProviderDefault => 5,
        // Not in ADR 2's table: `issue/tests.rs` covers them.
        // Plan and review runs' own: `kinds/tests.rs`.
        Layer::Issue
        | Layer::RepoFile
        | Layer::RepoPlan
        | Layer::GlobalPlan
        | Layer::RepoReview
        | Layer::GlobalReview => unreachable!("not a layer of the table"),
    }
}

fn build(c: Combo, v: &[String; 6], model: bool) -> (Defaults, Defaults, Request) {
    let on = |b: bool, i: usize| b.then(|| v[i].clone());
    let mut global = Defaults::default();
    let mut repo = Defaults::default();
    let mut req = Request::default();
    if model {
        req.model = on(c.request, 0);
        repo.afk_model_default = on(c.repo_afk, 1);
        global.afk_model_default = on(c.global_afk, 2);
        repo.model_default = on(c.repo_base, 3);
        global.model_default = on(c.global_base, 4);
    } else {
        req.effort = on(c.request, 0);
        repo.afk_effort_default = on(c.repo_afk, 1);
        global.afk_effort_default = on(c.global_afk, 2);
        repo.effort_default = on(c.repo_base, 3);
        global.effort_default = on(c.global_base, 4);
    }
    (global, repo, req)
}

#[test]
fn model_and_effort_follow_the_chain_for_every_layer_combination() {
    let mut checked = 0;
    for id in ProviderId::all() {
        let p = id.provider();
        for is_model in [true, false] {
            let v = layer_values(p, is_model);
            for c in Combo::all() {
                for kind in [RunKind::Manual, RunKind::Afk] {
                    let (global, repo, req) = build(c, &v, is_model);
                    let r = resolve(id, kind, &global, &repo, &req);
                    let got = if is_model { &r.model } else { &r.effort };
                    let want = c.expected_source(kind);
                    assert_eq!(got.layer, want, "{} {kind} {c:?} model={is_model}", p.id());
                    assert_eq!(got.value, v[source_index(want)], "{} {kind} {c:?}", p.id());
                    checked += 1;
                }
            }
        }
    }
    // 2 providers x 2 values x 32 combinations x 2 kinds
    assert_eq!(checked, 256);
}

#[test]
fn empty_strings_inherit_like_absent_values() {
    let p = id("claude-code");
    let blank = Some(String::new());
    let global = Defaults {
        model_default: Some("opus".into()),
        afk_model_default: blank.clone(),
        ..Defaults::default()
    };
    let repo = Defaults {
        model_default: blank.clone(),
        afk_model_default: blank.clone(),
        ..Defaults::default()
    };
    let req = Request {
        model: blank,
        effort: None,
        options: Default::default(),
    };
    for kind in [RunKind::Manual, RunKind::Afk] {
        let r = resolve(p, kind, &global, &repo, &req);
        assert_eq!(
            r.model,
            Sourced {
                value: "opus".into(),
                layer: Layer::GlobalBase
            }
        );
    }
}

#[test]
fn afk_ignores_the_request() {
    let p = id("codex");
    let req = Request {
        model: Some("gpt-6-sol".into()),
        effort: Some("low".into()),
        options: Default::default(),
    };
    let r = resolve(
        p,
        RunKind::Afk,
        &Defaults::default(),
        &Defaults::default(),
        &req,
    );
    assert_eq!(r.model.layer, Layer::ProviderDefault);
    assert_eq!(r.effort.layer, Layer::ProviderDefault);
}

fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_option_key_follows_repo_then_global_then_spec_default() {
    for id in ProviderId::all() {
        let p = id.provider();
        for spec in p.spawn_options() {
            // Two non-default values (bools only have one: reuse it).
            let others: Vec<&str> = spec
                .values
                .iter()
                .copied()
                .filter(|v| *v != spec.default)
                .collect();
            let repo_v = others[0];
            let global_v = others[others.len() - 1];
            for (repo_set, global_set) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                let global = Defaults {
                    afk_options: if global_set {
                        opts(&[(spec.key, global_v)])
                    } else {
                        BTreeMap::new()
                    },
                    ..Defaults::default()
                };
                let repo = Defaults {
                    afk_options: if repo_set {
                        opts(&[(spec.key, repo_v)])
                    } else {
                        BTreeMap::new()
                    },
                    ..Defaults::default()
                };
                let manual = resolve(id, RunKind::Manual, &global, &repo, &Request::default());
                assert!(manual.options.is_empty(), "manual runs get no options");

                let afk = resolve(id, RunKind::Afk, &global, &repo, &Request::default());
                let got = &afk.options[spec.key];
                let want = match (repo_set, global_set) {
                    (true, _) => Sourced {
                        value: repo_v.into(),
                        layer: Layer::RepoAfk,
                    },
                    (false, true) => Sourced {
                        value: global_v.into(),
                        layer: Layer::GlobalAfk,
                    },
                    (false, false) => Sourced {
                        value: spec.default.into(),
                        layer: Layer::ProviderDefault,
                    },
                };
                assert_eq!(
                    got,
                    &want,
                    "{}.{} repo={repo_set} global={global_set}",
                    p.id(),
                    spec.key
                );
                // Every declared key is resolved, and nothing else.
                let keys: Vec<&str> = afk.options.keys().map(String::as_str).collect();
                let declared: Vec<&str> = {
                    let mut d: Vec<&str> = p.spawn_options().iter().map(|o| o.key).collect();
                    d.sort();
                    d
                };
                assert_eq!(keys, declared);
            }
        }
    }
}

#[test]
fn an_explicit_repo_false_wins_over_a_global_true() {
    let p = id("claude-code");
    let global = Defaults {
        afk_options: opts(&[("ultracode", "true")]),
        ..Defaults::default()
    };
    let repo = Defaults {
        afk_options: opts(&[("ultracode", "false")]),
        ..Defaults::default()
    };
    let r = resolve(p, RunKind::Afk, &global, &repo, &Request::default());
    assert_eq!(
        r.options["ultracode"],
        Sourced {
            value: "false".into(),
            layer: Layer::RepoAfk
        }
    );
}

#[test]
fn keys_the_provider_does_not_declare_never_reach_it() {
    let p = id("codex");
    let global = Defaults {
        afk_options: opts(&[("ultracode", "true")]),
        ..Defaults::default()
    };
    let r = resolve(
        p,
        RunKind::Afk,
        &global,
        &Defaults::default(),
        &Request::default(),
    );
    assert!(!r.options.contains_key("ultracode"));
    assert!(!r.option_values().contains_key("ultracode"));
}
