//! How labctl prints: JSON as lab sent it (`--json`), or text for people.

use serde_json::Value;

use crate::domain::{compact_cost, compact_tokens};

/// Prints `v` as pretty JSON.
pub fn json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

/// An error under `--json`: `{"error": {"code", "exit", "message"}}` on
/// stdout, where a script reads the answer.
pub fn error_json(code: super::Exit, message: &str) {
    json(&serde_json::json!({
        "error": {"code": code.name(), "exit": code as u8, "message": message}
    }));
}

/// A string field, or `-` when absent or null.
pub fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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

pub fn providers(v: &Value, as_json: bool) {
    if as_json {
        return json(v);
    }
    for p in v.as_array().into_iter().flatten() {
        println!("{} ({})", s(&p["id"]), s(&p["name"]));
        let list = |k: &str| {
            p[k].as_array()
                .map(|a| a.iter().map(s).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        };
        println!(
            "  models:  {} (default {})",
            list("models"),
            s(&p["default_model"])
        );
        println!(
            "  efforts: {} (default {})",
            list("efforts"),
            s(&p["default_effort"])
        );
        for o in p["options"].as_array().into_iter().flatten() {
            let values = o["values"]
                .as_array()
                .map(|a| a.iter().map(s).collect::<Vec<_>>().join("|"))
                .unwrap_or_default();
            println!(
                "  option {} ({}: {values}, default {}): {}",
                s(&o["key"]),
                s(&o["type"]),
                s(&o["default"]),
                s(&o["description"])
            );
        }
    }
}

pub fn repos(v: &Value, as_json: bool) {
    if as_json {
        return json(v);
    }
    let rows: Vec<Vec<String>> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                s(&r["id"]),
                s(&r["name"]),
                s(&r["provider"]),
                if r["afk_enabled"].as_bool() == Some(true) {
                    "on"
                } else {
                    "off"
                }
                .to_owned(),
                if r["path"].is_null() {
                    s(&r["url"])
                } else {
                    s(&r["path"])
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

fn options(v: &Value) -> String {
    let Some(m) = v.as_object().filter(|m| !m.is_empty()) else {
        return "-".to_owned();
    };
    m.iter()
        .map(|(k, v)| format!("{k}={}", s(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn repo(r: &Value, as_json: bool) {
    if as_json {
        return json(r);
    }
    let source = if r["path"].is_null() {
        format!("url {}", s(&r["url"]))
    } else {
        format!("path {}", s(&r["path"]))
    };
    println!("repo {} (id {})", s(&r["name"]), s(&r["id"]));
    println!("  source:          {source}");
    println!("  default branch:  {}", s(&r["default_branch"]));
    println!("  provider:        {}", s(&r["provider"]));
    println!(
        "  model, effort:   {}, {}",
        s(&r["model_default"]),
        s(&r["effort_default"])
    );
    println!(
        "  AFK model, effort: {}, {}",
        s(&r["afk_model_default"]),
        s(&r["afk_effort_default"])
    );
    println!("  AFK options:     {}", options(&r["afk_options"]));
    println!(
        "  AFK:             {} (label '{}', at most {} at once)",
        if r["afk_enabled"].as_bool() == Some(true) {
            "on"
        } else {
            "off"
        },
        s(&r["afk_label"]),
        s(&r["afk_max_concurrent"])
    );
    match r["issue_source"].as_str() {
        Some("builtin") | None => println!("  issues:          lab's built-in tracker"),
        Some(kind) => println!(
            "  issues:          {kind}, {} at {} (token: {})",
            s(&r["forge_repo"]),
            s(&r["forge_url"]),
            r["forge_token"]
                .as_str()
                .unwrap_or("from lab's environment")
        ),
    }
    println!(
        "  ('-' inherits; `labctl resolve {}` shows what runs get)",
        s(&r["name"])
    );
}

pub fn settings(v: &Value, as_json: bool) {
    if as_json {
        return json(v);
    }
    let mut rows = Vec::new();
    for (id, d) in v["providers"].as_object().into_iter().flatten() {
        rows.push(vec![
            id.clone(),
            s(&d["model_default"]),
            s(&d["effort_default"]),
            s(&d["afk_model_default"]),
            s(&d["afk_effort_default"]),
            options(&d["afk_options"]),
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
    let a = &v["afk"];
    println!();
    println!(
        "AFK: at most {} runs at once, a tick every {} s, a run may take {} min",
        s(&a["max_concurrent"]),
        s(&a["tick_seconds"]),
        s(&a["run_timeout_minutes"])
    );
    let cap = |v: &Value| {
        if v.is_null() {
            "no cap".to_owned()
        } else {
            s(v)
        }
    };
    println!(
        "     {} round(s) on a pull request, {} attempt(s) per issue, token budget {}, cost budget {}, {} MiB per run",
        s(&a["max_rounds"]),
        s(&a["max_attempts"]),
        cap(&a["max_tokens"]),
        if a["max_cost_usd"].is_null() {
            "no cap".to_owned()
        } else {
            format!("${}", s(&a["max_cost_usd"]))
        },
        s(&a["memory_per_run_mb"])
    );
    let r = &v["runs"];
    let mib = |v: &Value| {
        if v.is_null() {
            "no cap".to_owned()
        } else {
            format!("{} MiB", s(v))
        }
    };
    let keys = r["carry_cli_keys"]
        .as_array()
        .map(|k| k.iter().map(s).collect::<Vec<_>>().join(", "))
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "none".to_owned());
    println!(
        "Runs: memory {}, processes {}, log kept {}, CLI keys carried: {keys}",
        mib(&r["memory_max_mb"]),
        cap(&r["pids_max"]),
        mib(&r["log_max_mb"])
    );
    println!("('-' inherits)");
}

pub fn resolved(repo: &str, v: &Value, as_json: bool) {
    if as_json {
        return json(v);
    }
    println!("{} run of {repo} ({}):", s(&v["kind"]), s(&v["provider"]));
    let mut rows = vec![
        vec![
            "model".to_owned(),
            s(&v["model"]["value"]),
            s(&v["model"]["source"]),
        ],
        vec![
            "effort".to_owned(),
            s(&v["effort"]["value"]),
            s(&v["effort"]["source"]),
        ],
    ];
    for (k, o) in v["options"].as_object().into_iter().flatten() {
        rows.push(vec![format!("option {k}"), s(&o["value"]), s(&o["source"])]);
    }
    table(&["WHAT", "VALUE", "FROM"], &rows);
}

/// How long ago an RFC 3339 time was, roughly ("3m", "2h").
fn age(v: &Value) -> String {
    let Some(t) = v.as_str().and_then(|t| humantime::parse_rfc3339(t).ok()) else {
        return "-".to_owned();
    };
    let secs = std::time::SystemTime::now()
        .duration_since(t)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn state(r: &Value) -> String {
    let st = s(&r["state"]);
    let st = match (
        st.as_str(),
        r["exit_status"].as_i64(),
        r["exit_signal"].as_i64(),
    ) {
        ("exited", Some(code), _) => format!("exited ({code})"),
        ("exited", None, Some(sig)) => format!("exited (signal {sig})"),
        _ => st,
    };
    // A run outside lab's sandbox says so wherever its state is shown.
    if r["sandboxed"] == false {
        format!("{st} UNSANDBOXED")
    } else {
        st
    }
}

/// What a live run's agent is doing and for how long (`waiting 2m`), from
/// its CLI's hooks; `-` when unknown or ended.
fn agent(r: &Value) -> String {
    let a = &r["agent_state"];
    if a.is_null() || !r["ended_at"].is_null() {
        return "-".to_owned();
    }
    format!("{} {}", s(&a["state"]), age(&a["since"]))
}

pub fn runs(v: &Value, as_json: bool, all: bool) {
    if as_json {
        return json(v);
    }
    let rows: Vec<Vec<String>> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                s(&r["id"]),
                s(&r["repo"]),
                s(&r["kind"]),
                issue_cell(r),
                state(r),
                agent(r),
                s(&r["model"]["value"]),
                s(&r["effort"]["value"]),
                age(&r["created_at"]),
                usage_cell(&r["usage"]),
                if r["state_reason"].is_null() || r["state"] == "running" {
                    s(&r["session"])
                } else {
                    s(&r["state_reason"])
                },
            ]
        })
        .collect();
    if rows.is_empty() {
        println!(
            "{}",
            if all {
                "no runs yet: labctl start REPO"
            } else {
                "no live runs (labctl ps --all shows ended ones)"
            }
        );
        return;
    }
    table(
        &[
            "ID",
            "REPO",
            "KIND",
            "ISSUE",
            "STATE",
            "AGENT",
            "MODEL",
            "EFFORT",
            "AGE",
            "TOKENS/COST",
            "SESSION / REASON",
        ],
        &rows,
    );
}

/// A run's issue, attempt, round and outcome in one cell: `#12 a2 r3
/// pr-green`; `-` for a run without an issue.
fn issue_cell(r: &Value) -> String {
    let i = &r["issue"];
    if i.is_null() {
        return "-".to_owned();
    }
    let mut cell = format!("#{}", s(&i["number"]));
    if r["attempt"].as_i64().is_some_and(|a| a > 1) {
        cell.push_str(&format!(" a{}", s(&r["attempt"])));
    }
    if r["round"].as_i64().is_some_and(|a| a > 1) {
        cell.push_str(&format!(" r{}", s(&r["round"])));
    }
    if !r["outcome"].is_null() {
        cell.push_str(&format!(" {}", s(&r["outcome"])));
    }
    cell
}

/// A run's usage in one cell: every token, and the cost (`?` when a model
/// has no price); `-` until known.
fn usage_cell(u: &Value) -> String {
    if u.is_null() {
        return "-".to_owned();
    }
    let n = |k: &str| u[k].as_i64().unwrap_or(0);
    let tokens = n("input_tokens")
        .saturating_add(n("output_tokens"))
        .saturating_add(n("cache_read_tokens"))
        .saturating_add(n("cache_creation_tokens"));
    format!(
        "{}/{}",
        compact_tokens(tokens),
        compact_cost(u["cost_usd"].as_f64())
    )
}

/// One run, field by field (`labctl show`).
pub fn run_detail(r: &Value, as_json: bool) {
    if as_json {
        return json(r);
    }
    let u = &r["usage"];
    let mut rows = vec![
        ("run", s(&r["id"])),
        ("repo", s(&r["repo"])),
        ("kind", s(&r["kind"])),
        ("state", state(r)),
        ("reason", s(&r["state_reason"])),
        ("provider", s(&r["provider"])),
        ("model", s(&r["model"]["value"])),
        ("effort", s(&r["effort"]["value"])),
        ("branch", s(&r["branch"])),
        ("workspace", s(&r["workspace"])),
        ("session", s(&r["session"])),
        ("cli session", s(&r["cli_session_id"])),
        (
            "issue",
            match &r["issue"] {
                Value::Null => "-".to_owned(),
                i => format!(
                    "{}#{} {} ({})",
                    s(&i["repo"]),
                    s(&i["number"]),
                    s(&i["title"]),
                    s(&i["url"])
                ),
            },
        ),
        ("attempt", s(&r["attempt"])),
        ("round", s(&r["round"])),
        ("outcome", s(&r["outcome"])),
        ("created", s(&r["created_at"])),
        ("ended", s(&r["ended_at"])),
    ];
    if u.is_null() {
        rows.push(("usage", "not known yet".to_owned()));
    } else {
        rows.extend([
            ("input tokens", s(&u["input_tokens"])),
            ("output tokens", s(&u["output_tokens"])),
            ("cache read", s(&u["cache_read_tokens"])),
            ("cache written", s(&u["cache_creation_tokens"])),
            ("turns", s(&u["turns"])),
            (
                "cost",
                match u["cost_usd"].as_f64() {
                    Some(c) => format!("${c:.4}"),
                    None => "unknown (a model without a price)".to_owned(),
                },
            ),
        ]);
        if u["unpriced_tokens"].as_i64().unwrap_or(0) > 0 {
            rows.push((
                "unpriced",
                format!(
                    "{} tokens of models lab has no price for (not in the cost)",
                    s(&u["unpriced_tokens"])
                ),
            ));
        }
    }
    for (k, v) in rows {
        println!("{k:<14} {v}");
    }
}

pub fn run_started(r: &Value) {
    println!(
        "run {} of {}: {} ({} {}, {})",
        s(&r["id"]),
        s(&r["repo"]),
        state(r),
        s(&r["model"]["value"]),
        s(&r["effort"]["value"]),
        s(&r["branch"])
    );
    if r["state"] == "running" {
        println!(
            "  attach: labctl attach {}   (or {})",
            s(&r["id"]),
            s(&r["attach_command"])
        );
        println!("  output: labctl logs -f {}", s(&r["id"]));
    }
}
