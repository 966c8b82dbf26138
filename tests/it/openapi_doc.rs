//! The OpenAPI document is a contract a generated client can trust: each
//! parameter is declared where the server reads it, and each operation
//! documents the answers that the layers and extractors in front of its
//! handler give (the token check, undecodable input, unknown ids, bodies
//! that are too large or not JSON). `.ci/schemathesis` checks the rest
//! against a running server.

use serde_json::Value;
use utoipa::IntoParams;

fn doc() -> Value {
    serde_json::to_value(lab::http::openapi()).unwrap()
}

/// `(method, path, operation)` for every operation of the document.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                ops.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    assert!(ops.len() >= 30, "{} operations", ops.len());
    ops
}

/// The `{name}`s of a path template.
fn template_names(path: &str) -> Vec<&str> {
    path.split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}').map(|(n, _)| n))
        .collect()
}

fn params(op: &Value) -> Vec<Value> {
    op["parameters"].as_array().cloned().unwrap_or_default()
}

#[test]
fn parameters_are_declared_where_the_server_reads_them() {
    for (method, path, op) in operations(&doc()) {
        let names = template_names(&path);
        for p in params(&op) {
            let name = p["name"].as_str().unwrap();
            match p["in"].as_str().unwrap() {
                "path" => {
                    assert!(
                        names.contains(&name),
                        "{method} {path}: path parameter {name} is not in the path"
                    );
                    assert_eq!(p["required"], true, "{method} {path}: {name}");
                }
                "query" => assert!(
                    !names.contains(&name),
                    "{method} {path}: {name} is in the path"
                ),
                other => panic!("{method} {path}: {name} is in {other}"),
            }
        }
        for name in names {
            assert!(
                params(&op)
                    .iter()
                    .any(|p| p["name"] == name && p["in"] == "path"),
                "{method} {path}: {{{name}}} is not declared"
            );
        }
    }
}

#[test]
fn query_structs_are_optional_query_parameters() {
    use lab::http::{issues::IssueQuery, repos::ResolveQuery, runs};
    let structs = [
        ("/api/v1/runs", runs::ListQuery::into_params(|| None)),
        (
            "/api/v1/repos/{id}/resolve",
            ResolveQuery::into_params(|| None),
        ),
        (
            "/api/v1/repos/{id}/issues",
            IssueQuery::into_params(|| None),
        ),
        (
            "/api/v1/runs/{id}/output",
            runs::OutputQuery::into_params(|| None),
        ),
    ];
    let doc = doc();
    for (path, fields) in structs {
        let declared = params(&doc["paths"][path]["get"]);
        for field in fields {
            let field = serde_json::to_value(field).unwrap();
            assert_eq!(field["in"], "query", "{path}: {field}");
            let name = &field["name"];
            let p = declared
                .iter()
                .find(|p| &p["name"] == name)
                .unwrap_or_else(|| panic!("GET {path} does not declare {name}"));
            assert_eq!(p["in"], "query", "GET {path}: {name}");
            assert_eq!(p["required"], false, "GET {path}: {name}");
            let schema = &p["schema"];
            assert!(
                schema["type"].is_string() || schema["$ref"].is_string(),
                "GET {path}: {name} is typed, not nullable: {schema}"
            );
        }
    }
}

#[test]
fn every_operation_documents_what_the_layers_answer() {
    for (method, path, op) in operations(&doc()) {
        let has = |status: &str| op["responses"][status].is_object();
        let body = op["requestBody"].is_object();
        let mut wanted = vec!["401", "403"];
        if body || !params(&op).is_empty() {
            wanted.push("400");
        }
        if !template_names(&path).is_empty() {
            wanted.push("404");
        }
        if body {
            assert!(
                op["requestBody"]["content"]["application/json"].is_object(),
                "{method} {path}"
            );
            wanted.extend(["413", "415"]);
        }
        for status in wanted {
            assert!(has(status), "{method} {path} does not document {status}");
        }
        for (status, r) in op["responses"].as_object().unwrap() {
            assert!(
                !r["description"].as_str().unwrap_or("").is_empty(),
                "{method} {path} {status} has no description"
            );
            if !status.starts_with('2') {
                assert_eq!(
                    r["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
        }
    }
}

#[test]
fn the_values_the_server_checks_are_in_the_schemas() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let runs = params(&doc["paths"]["/api/v1/runs"]["get"]);
    let limit = runs.iter().find(|p| p["name"] == "limit").unwrap();
    assert_eq!(limit["schema"]["minimum"], 1);
    assert_eq!(limit["schema"]["maximum"], lab::http::runs::MAX_LIST);
    let afk = &schemas["AfkPatchBody"]["properties"];
    assert_eq!(
        afk["max_concurrent"]["maximum"],
        lab::settings::MAX_CONCURRENT.1
    );
    assert_eq!(
        afk["tick_seconds"]["maximum"],
        lab::settings::TICK_SECONDS.1
    );
    let repo = &schemas["RepoPatchBody"]["properties"];
    assert_eq!(
        repo["issue_source"]["enum"],
        serde_json::json!(["builtin", "gitea", "github", "forgejo", "", null])
    );
    assert_eq!(repo["afk_options"]["type"], "object", "null is refused");
    // The closed set of states, `lost` included (ADR 18).
    let states: Vec<&str> = lab::domain::RunState::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    assert_eq!(schemas["RunState"]["enum"], serde_json::json!(states));
    assert!(states.contains(&"lost"));
    let claude =
        &schemas["SettingsPatchBody"]["properties"]["providers"]["properties"]["claude-code"];
    assert!(
        claude["properties"]["model_default"]["enum"]
            .as_array()
            .unwrap()
            .contains(&"opus".into())
    );
    assert_eq!(
        schemas["SettingsPatchBody"]["properties"]["providers"]["additionalProperties"],
        false
    );
    let new_repo = &schemas["NewRepoBody"]["allOf"];
    assert_eq!(new_repo[1]["required"], serde_json::json!(["name"]));
    assert_eq!(
        schemas["StartRunBody"]["required"],
        serde_json::json!(["repo"])
    );
}

/// Every operation that may ask a repo's forge (its issues and pull
/// requests) documents what a forge's failure answers: 429 and 502.
#[test]
fn operations_that_reach_a_forge_document_its_failures() {
    let doc = doc();
    let mut seen = 0;
    for (method, path, op) in operations(&doc) {
        // Merge and close act on the built-in tracker only: a forge's pull
        // request is refused (409) before its forge is asked.
        let builtin_only = path.ends_with("/merge") || path.ends_with("/close");
        // An issue's plans are lab's own records; a forge that fails while
        // an approved plan's work run starts ends that attempt (said on the
        // claim), never the decision's answer.
        // So are its reviews' verdicts.
        let plans =
            path.ends_with("/plans") || path.contains("/plan/") || path.ends_with("/reviews");
        let forge = (path.starts_with("/api/v1/repos/{id}/issues")
            || path.starts_with("/api/v1/repos/{id}/pulls")
            || path == "/api/v1/runs/{id}/pull")
            && !(path.starts_with("/api/v1/repos/{id}/pulls/") && builtin_only)
            && !plans;
        if !forge {
            continue;
        }
        seen += 1;
        for status in ["429", "502"] {
            assert!(
                op["responses"].get(status).is_some(),
                "{method} {path} does not document {status}"
            );
        }
    }
    assert!(seen >= 7, "{seen} forge operations");
}

/// A run's CLI session and usage, and the ledger's tokens and cost, are in
/// the document with the contract's names.
#[test]
fn usage_is_documented() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let run = &schemas["RunBody"]["properties"];
    assert!(run["cli_session_id"].is_object(), "{run}");
    assert!(run["usage"].is_object(), "{run}");
    let usage = &schemas["UsageBody"];
    let mut fields: Vec<&str> = usage["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "cache_creation_tokens",
            "cache_read_tokens",
            "cost_usd",
            "input_tokens",
            "output_tokens",
            "turns",
            "unpriced_tokens"
        ]
    );
    let ledger = &schemas["LedgerBody"]["properties"];
    assert!(ledger["by_outcome"].is_object(), "{ledger}");
    let row = &schemas["LedgerRow"]["properties"];
    for f in ["outcome", "tokens", "cost_usd", "cost_per_success_usd"] {
        assert!(row[f].is_object(), "LedgerRow.{f}");
    }
}

/// Two schemas of one name would be one in the document (the last wins):
/// the doctor's finding and a review's are apart.
#[test]
fn the_doctor_s_and_a_review_s_findings_are_apart() {
    let doc = doc();
    let s = &doc["components"]["schemas"];
    assert!(
        s["Finding"]["properties"].get("area").is_some(),
        "{}",
        s["Finding"]
    );
    assert!(
        s["ReviewFinding"]["properties"].get("path").is_some(),
        "{}",
        s["ReviewFinding"]
    );
    assert!(s["ReviewSubmission"]["properties"].get("verdict").is_some());
}
