//! How labctl shows plan and review runs' own settings (issue 28).

use super::{opt, options, table};
use crate::http::repos::RepoBody;
use crate::http::settings::SettingsBody;

/// A repo's plan and review providers and defaults, a line each.
pub fn repo(r: &RepoBody) {
    for (kind, provider, model, effort, opts) in [
        (
            "plan",
            &r.plan_provider,
            &r.plan_model_default,
            &r.plan_effort_default,
            &r.plan_options,
        ),
        (
            "review",
            &r.review_provider,
            &r.review_model_default,
            &r.review_effort_default,
            &r.review_options,
        ),
    ] {
        println!(
            "  {kind:<6} on {}: {}, {}; options {}",
            opt(provider),
            opt(model),
            opt(effort),
            options(opts)
        );
    }
}

/// Each provider's plan and review defaults, and the kinds' providers.
pub fn settings(v: &SettingsBody) {
    println!();
    let mut kinds = Vec::new();
    for (id, d) in &v.providers {
        for (kind, model, effort, opts) in [
            (
                "plan",
                &d.plan_model_default,
                &d.plan_effort_default,
                &d.plan_options,
            ),
            (
                "review",
                &d.review_model_default,
                &d.review_effort_default,
                &d.review_options,
            ),
        ] {
            kinds.push(vec![
                id.clone(),
                kind.to_owned(),
                opt(model),
                opt(effort),
                options(opts),
            ]);
        }
    }
    table(&["PROVIDER", "KIND", "MODEL", "EFFORT", "OPTIONS"], &kinds);
    println!(
        "Plan runs on {}, review runs on {} ('-': each repo's provider)",
        opt(&v.plan_provider),
        opt(&v.review_provider)
    );
}
