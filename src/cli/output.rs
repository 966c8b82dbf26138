//! How labctl prints: lab's answer as JSON (`--json`), or text for people.
//! Both read the server's own body types: `--json` prints the body as it
//! was decoded, which is the JSON lab sent (the types round-trip it).

use std::collections::BTreeMap;
use std::fmt::Display;

use serde::Serialize;

use crate::http::providers::ProviderBody;
use crate::http::repos::{RepoBody, ResolvedBody};
use crate::http::settings::SettingsBody;

/// Text an agent wrote, safe for a terminal: control characters (but tab)
/// as `\xNN`.
pub fn clean(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    for c in t.chars() {
        if (c.is_control() && c != '\t') || c == '\u{7f}' {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Lines an agent wrote, each [`clean`]ed.
pub fn clean_lines(t: &str) -> String {
    t.trim_end()
        .lines()
        .map(clean)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints `v` as pretty JSON.
pub fn json<T: Serialize + ?Sized>(v: &T) {
    match serde_json::to_string_pretty(v) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("labctl: cannot print the answer as JSON: {e}"),
    }
}

/// An error under `--json`: `{"error": {"code", "exit", "message"}}` on
/// stdout, where a script reads the answer.
pub fn error_json(code: super::Exit, message: &str) {
    /// The error, as labctl prints it under `--json`.
    #[derive(Serialize)]
    struct JsonError<'a> {
        error: JsonErrorDetail<'a>,
    }
    /// What failed: the exit code's name and number, and why.
    #[derive(Serialize)]
    struct JsonErrorDetail<'a> {
        code: &'a str,
        exit: u8,
        message: &'a str,
    }
    json(&JsonError {
        error: JsonErrorDetail {
            code: code.name(),
            exit: code as u8,
            message,
        },
    });
}

/// A value lab may leave out (`null`): itself, or `-`.
pub fn opt<T: Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "-".to_owned(), ToString::to_string)
}

/// A number of dollars or the like as JSON spells it (`5.0`, `0.25`), the
/// way labctl always printed lab's numbers; `-` for one JSON cannot hold.
pub fn number(v: f64) -> String {
    serde_json::Number::from_f64(v).map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// Prints rows as aligned columns under a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

pub fn providers(v: &[ProviderBody], as_json: bool) {
    if as_json {
        return json(v);
    }
    for p in v {
        println!("{} ({})", p.id, p.name);
        println!(
            "  models:  {} (default {})",
            p.models.join(", "),
            p.default_model
        );
        println!(
            "  efforts: {} (default {})",
            p.efforts.join(", "),
            p.default_effort
        );
        for o in &p.options {
            let asks = if o.asks.is_empty() {
                String::new()
            } else {
                format!("; manual runs also {}", o.asks.join("|"))
            };
            println!(
                "  option {} ({}: {}, default {}{asks}): {}",
                o.key,
                o.ty,
                o.values.join("|"),
                o.default,
                o.description
            );
        }
    }
}

pub fn knobs(v: &[crate::http::knobs::KnobBody], as_json: bool) {
    use crate::http::knobs::Allowed;
    if as_json {
        return json(v);
    }
    for k in v {
        let allowed = match &k.allowed {
            Some(Allowed::Words(w)) => w.join("|"),
            Some(Allowed::Range { min, max }) => format!("{min}..{max}"),
            None => k.ty.clone(),
        };
        let default = match k.default.shown() {
            d if d.is_empty() => "none".to_owned(),
            d => d,
        };
        println!("{} ({allowed}, default {default})", k.key);
        println!("  {}", k.description);
    }
}

/// `on` or `off`.
fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

pub fn repos(v: &[RepoBody], as_json: bool) {
    if as_json {
        return json(v);
    }
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.name.clone(),
                r.provider.clone(),
                on_off(r.afk_enabled).to_owned(),
                match &r.path {
                    None => opt(&r.url),
                    Some(p) => p.clone(),
                },
            ]
        })
        .collect();
    if rows.is_empty() {
        println!("no repos yet: labctl repo add NAME --path DIR");
        return;
    }
    table(&["ID", "NAME", "PROVIDER", "AFK", "SOURCE"], &rows);
}

fn options(m: &BTreeMap<String, String>) -> String {
    if m.is_empty() {
        return "-".to_owned();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn repo(r: &RepoBody, as_json: bool) {
    if as_json {
        return json(r);
    }
    let source = match &r.path {
        None => format!("url {}", opt(&r.url)),
        Some(p) => format!("path {p}"),
    };
    println!("repo {} (id {})", r.name, r.id);
    println!("  source:          {source}");
    println!("  default branch:  {}", r.default_branch);
    println!("  provider:        {}", r.provider);
    println!(
        "  model, effort:   {}, {}",
        opt(&r.model_default),
        opt(&r.effort_default)
    );
    println!(
        "  AFK model, effort: {}, {}",
        opt(&r.afk_model_default),
        opt(&r.afk_effort_default)
    );
    println!("  AFK options:     {}", options(&r.afk_options));
    kinds::repo(r);
    println!(
        "  AFK:             {} (label '{}', at most {} at once)",
        on_off(r.afk_enabled),
        r.afk_label,
        r.afk_max_concurrent
    );
    match r.issue_source.as_str() {
        "builtin" => println!("  issues:          lab's built-in tracker"),
        kind => println!(
            "  issues:          {kind}, {} at {} (token: {})",
            opt(&r.forge_repo),
            opt(&r.forge_url),
            r.forge_token.as_deref().unwrap_or("from lab's environment")
        ),
    }
    println!(
        "  knobs:           {}",
        super::knob_args::knobs_line(&r.knobs)
    );
    let from_file = r
        .config_file
        .as_ref()
        .and_then(|c| c.check_command.as_deref());
    match (r.check_command.as_deref(), from_file) {
        (Some(c), _) => println!("  check command:   {c}"),
        (None, Some(c)) => println!("  check command:   {c} (from .lab.toml)"),
        (None, None) => println!("  check command:   none (lab runs no check of its own)"),
    }
    if !r.allowed_models.is_empty() {
        println!("  issues may ask for: {}", r.allowed_models.join(", "));
    }
    if let Some(c) = &r.config_file {
        let at = c.commit.as_deref().map(short_sha).unwrap_or("-");
        match &c.error {
            None => println!("  .lab.toml:       read at {at}"),
            Some(e) => println!(
                "  .lab.toml:       the newest is refused ({e}); lab keeps the one at {at}"
            ),
        }
        let file = crate::repo::config_file::RepoFile {
            model: c.model.clone(),
            effort: c.effort.clone(),
            options: c.options.clone(),
            knobs: c.knobs.clone(),
            check_command: c.check_command.clone(),
            label: c.label.clone(),
        };
        for (k, v) in file.entries() {
            println!("    {k} = {v}");
        }
    }
    println!(
        "  ('-' inherits; `labctl resolve {}` shows what runs get)",
        r.name
    );
}

mod kinds;
mod runs;

pub use runs::{receipt, run_detail, run_started, runs};

fn short_sha(s: &str) -> &str {
    s.get(..12).unwrap_or(s)
}

pub fn settings(v: &SettingsBody, as_json: bool) {
    if as_json {
        return json(v);
    }
    let mut rows = Vec::new();
    for (id, d) in &v.providers {
        rows.push(vec![
            id.clone(),
            opt(&d.model_default),
            opt(&d.effort_default),
            opt(&d.afk_model_default),
            opt(&d.afk_effort_default),
            options(&d.afk_options),
        ]);
    }
    table(
        &[
            "PROVIDER",
            "MODEL",
            "EFFORT",
            "AFK MODEL",
            "AFK EFFORT",
            "AFK OPTIONS",
        ],
        &rows,
    );
    kinds::settings(v);
    let a = &v.afk;
    println!();
    println!(
        "AFK: at most {} runs at once, a tick every {} s, a run may take {} min",
        a.max_concurrent, a.tick_seconds, a.run_timeout_minutes
    );
    let cap = |v: Option<i64>| v.map_or_else(|| "no cap".to_owned(), |n| n.to_string());
    println!(
        "     {} round(s) on a pull request, {} round(s) of plan, {} attempt(s) per issue, token budget {}, cost budget {}, {} MiB per run",
        a.max_rounds,
        a.max_plan_rounds,
        a.max_attempts,
        cap(a.max_tokens),
        a.max_cost_usd
            .map_or_else(|| "no cap".to_owned(), |usd| format!("${}", number(usd))),
        a.memory_per_run_mb
    );
    let r = &v.runs;
    let mib = |v: Option<i64>| v.map_or_else(|| "no cap".to_owned(), |n| format!("{n} MiB"));
    let keys = Some(r.carry_cli_keys.join(", "))
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "none".to_owned());
    println!(
        "Runs: memory {}, processes {}, log kept {}, CLI keys carried: {keys}",
        mib(r.memory_max_mb),
        cap(r.pids_max),
        mib(Some(r.log_max_mb))
    );
    println!("('-' inherits)");
}

pub fn resolved(repo: &str, v: &ResolvedBody, as_json: bool) {
    if as_json {
        return json(v);
    }
    println!("{} run of {repo} ({}):", v.kind, v.provider);
    let mut rows = vec![
        vec![
            "model".to_owned(),
            v.model.value.clone(),
            v.model.layer.to_string(),
        ],
        vec![
            "effort".to_owned(),
            v.effort.value.clone(),
            v.effort.layer.to_string(),
        ],
    ];
    for (k, o) in &v.options {
        rows.push(vec![
            format!("option {k}"),
            o.value.clone(),
            o.layer.to_string(),
        ]);
    }
    for k in &v.knobs {
        let value = match k.value.shown() {
            s if s.is_empty() => "-".to_owned(),
            s => s,
        };
        rows.push(vec![
            format!("knob {}", k.key),
            value,
            k.source.as_str().to_owned(),
        ]);
    }
    if let Some(b) = &v.budget {
        let none = || "no cap".to_owned();
        rows.push(vec![
            "max tokens".to_owned(),
            b.max_tokens.map_or_else(none, |n| n.to_string()),
            b.max_tokens_source.as_str().to_owned(),
        ]);
        rows.push(vec![
            "max cost".to_owned(),
            b.max_cost_usd.map_or_else(none, |c| format!("${c:.2}")),
            b.max_cost_usd_source.as_str().to_owned(),
        ]);
        rows.push(vec![
            "time limit".to_owned(),
            format!("{} min", b.run_timeout_minutes),
            b.run_timeout_minutes_source.as_str().to_owned(),
        ]);
    }
    table(&["WHAT", "VALUE", "FROM"], &rows);
    if let Some(why) = &v.issue_directives_ignored {
        println!("the issue's directives were left out: {why}");
    }
}
