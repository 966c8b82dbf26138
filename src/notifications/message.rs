//! What one notification looks like to each kind of endpoint.
//!
//! - webhook: a JSON object (`event`, `run`, `repo`, `state`, `phase`
//!   (`working` while the run lives, `done` once it ended), `reason`,
//!   `at`, `url`, `pull_request`, `outcome` (an AFK run's, else null) and
//!   `issue` (`{repo, number, title, url}` or null)).
//! - ntfy: the message as the plain-text body, with `Title`, `Tags` and
//!   `Click` headers (<https://docs.ntfy.sh/publish/>).
//! - Slack: `{"text": …}` with `&`, `<` and `>` escaped and the run's page
//!   as a `<url|text>` link (<https://api.slack.com/messaging/webhooks>,
//!   <https://api.slack.com/reference/surfaces/formatting#escaping>).
//!
//! A reason can come from an agent's screen: it is bounded, stripped of
//! control characters, and kept out of headers.

use reqwest::RequestBuilder;
use serde_json::json;

use crate::domain::{NotifyEvent, NotifyKind, Outcome, Phase, rfc3339};
use crate::settings::notifications::Endpoint;
use crate::store::Due;

/// Most characters of a reason a notification carries.
const MAX_REASON: usize = 300;

/// The request that delivers `d`; `run_url` is the run's page.
pub fn request(http: &reqwest::Client, d: &Due, run_url: &str) -> RequestBuilder {
    let rb = http.post(&d.url);
    let rb = match &d.token {
        Some(t) if d.kind != NotifyKind::Slack => rb.bearer_auth(t),
        _ => rb,
    };
    match d.kind {
        NotifyKind::Webhook => rb.json(&webhook_body(d, run_url)),
        NotifyKind::Slack => rb.json(&json!({ "text": slack_text(d, run_url) })),
        NotifyKind::Ntfy => rb
            .header("content-type", "text/plain; charset=utf-8")
            .header("title", header_safe(&title(d)))
            .header("tags", tags(d.event))
            .header("click", header_safe(run_url))
            .body(text(d)),
    }
}

/// A test of endpoint `e` (an operator's "Send a test"): the same shape as
/// a run's notification, with `"event": "test"` and no run.
pub fn test_request(http: &reqwest::Client, e: &Endpoint, lab_url: &str) -> RequestBuilder {
    const TITLE: &str = "lab: a test notification";
    const TEXT: &str = "lab can reach you here.";
    let rb = http.post(&e.url);
    let rb = match &e.token {
        Some(t) if e.kind != NotifyKind::Slack => rb.bearer_auth(t),
        _ => rb,
    };
    match e.kind {
        NotifyKind::Webhook => rb.json(&json!({
            "event": "test",
            "run": null,
            "repo": null,
            "state": null,
            "reason": TEXT,
            "at": rfc3339(crate::store::now_ms()),
            "url": lab_url,
            "pull_request": null,
            "outcome": null,
            "issue": null,
        })),
        NotifyKind::Slack => rb.json(&json!({ "text": format!("{TITLE}\n{TEXT}") })),
        NotifyKind::Ntfy => rb
            .header("content-type", "text/plain; charset=utf-8")
            .header("title", TITLE)
            .header("tags", "lab,wave")
            .header("click", header_safe(lab_url))
            .body(TEXT),
    }
}

pub fn webhook_body(d: &Due, run_url: &str) -> serde_json::Value {
    json!({
        "event": d.event,
        "run": d.run_id,
        "repo": d.repo,
        "state": d.state,
        "phase": phase(d),
        "reason": reason(d),
        "at": rfc3339(d.at),
        "url": run_url,
        "pull_request": d.pull_request.as_ref().map(|u| json!({ "url": u })),
        "outcome": d.outcome(),
        "issue": d.issue_number.map(|n| json!({
            "repo": d.repo,
            "number": n,
            "title": d.issue_title,
            "url": d.issue_url,
        })),
    })
}

/// The run's phase when it happened: a notification is sent while its
/// agent works or waits (`working`) or once the run ended (`done`).
fn phase(d: &Due) -> Phase {
    match d.state.as_str() {
        "exited" | "failed" | "stopped" => Phase::Done,
        _ => Phase::Working,
    }
}

fn reason(d: &Due) -> Option<String> {
    let r = d.reason.as_deref()?.trim();
    (!r.is_empty()).then(|| {
        r.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MAX_REASON)
            .collect()
    })
}

/// One line: what happened to which run.
pub fn title(d: &Due) -> String {
    let outcome = d.outcome();
    let what = match d.event {
        NotifyEvent::Waiting => "is waiting for you".to_owned(),
        // An AFK run's end says how it ended for its issue.
        NotifyEvent::Ended | NotifyEvent::Failed if outcome.is_some() => {
            format!("ended {}", outcome.map(Outcome::as_str).unwrap_or_default())
        }
        NotifyEvent::Ended => format!("ended ({})", d.state),
        // A lost run (ADR 18) comes under `failed`: it needs a resume.
        NotifyEvent::Failed if d.state == "lost" => {
            "lost its session; it can be resumed".to_owned()
        }
        NotifyEvent::Failed => "failed".to_owned(),
        NotifyEvent::PrOpened => "opened a pull request".to_owned(),
    };
    let issue = d
        .issue_number
        .map(|n| format!(" (issue #{n})"))
        .unwrap_or_default();
    format!("lab: run {} of {}{issue} {what}", d.run_id, d.repo)
}

/// The title, then the reason or the pull request.
fn text(d: &Due) -> String {
    let mut t = title(d);
    if let Some(url) = &d.pull_request {
        t.push_str(&format!("\n{url}"));
    } else if let Some(r) = reason(d) {
        t.push_str(&format!("\n{r}"));
    }
    t
}

fn slack_text(d: &Due, run_url: &str) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let link = |url: &str, label: &str| format!("<{}|{}>", esc(url), esc(label));
    let mut t = link(run_url, &title(d));
    if let Some(url) = &d.pull_request {
        t.push_str(&format!("\n{}", link(url, url)));
    } else if let Some(r) = reason(d) {
        t.push_str(&format!("\n{}", esc(&r)));
    }
    t
}

/// ntfy's tags (emoji short codes it shows before the title).
fn tags(e: NotifyEvent) -> &'static str {
    match e {
        NotifyEvent::Waiting => "lab,hourglass",
        NotifyEvent::Ended => "lab,checkered_flag",
        NotifyEvent::Failed => "lab,x",
        NotifyEvent::PrOpened => "lab,tada",
    }
}

/// A header value: printable ASCII only (ntfy reads UTF-8 titles only
/// encoded; lab keeps them plain).
fn header_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(kind: NotifyKind, event: NotifyEvent, reason: Option<&str>) -> Due {
        Due {
            id: 1,
            endpoint_id: 1,
            kind,
            url: "http://127.0.0.1:9/hook".into(),
            token: None,
            run_id: 7,
            repo: "demo".into(),
            event,
            state: "waiting".into(),
            reason: reason.map(str::to_owned),
            pull_request: None,
            at: 0,
            attempts: 0,
            outcome: None,
            issue_number: None,
            issue_title: None,
            issue_url: None,
        }
    }

    #[test]
    fn an_afk_run_s_end_names_its_outcome_and_issue() {
        let mut d = due(NotifyKind::Webhook, NotifyEvent::Ended, Some("time limit"));
        d.state = "stopped".into();
        d.outcome = Some("timed-out".into());
        d.issue_number = Some(3);
        d.issue_title = Some("Fix the parser".into());
        d.issue_url = Some("http://lab/repos/demo/issues/3".into());
        assert_eq!(title(&d), "lab: run 7 of demo (issue #3) ended timed-out");
        let b = webhook_body(&d, "http://lab/runs/7");
        assert_eq!(b["outcome"], "timed-out");
        assert_eq!(
            b["issue"],
            json!({"repo": "demo", "number": 3, "title": "Fix the parser",
                   "url": "http://lab/repos/demo/issues/3"})
        );
        // A failed AFK run too; a manual run keeps its state.
        d.event = NotifyEvent::Failed;
        d.outcome = Some("failed".into());
        assert_eq!(title(&d), "lab: run 7 of demo (issue #3) ended failed");
        let m = due(NotifyKind::Webhook, NotifyEvent::Ended, None);
        assert_eq!(webhook_body(&m, "u")["outcome"], serde_json::Value::Null);
        assert_eq!(webhook_body(&m, "u")["issue"], serde_json::Value::Null);
    }

    #[test]
    fn a_lost_run_is_told_it_can_be_resumed() {
        let mut d = due(NotifyKind::Ntfy, NotifyEvent::Failed, None);
        d.state = "lost".into();
        assert_eq!(
            title(&d),
            "lab: run 7 of demo lost its session; it can be resumed"
        );
        d.state = "failed".into();
        assert_eq!(title(&d), "lab: run 7 of demo failed");
    }

    #[test]
    fn a_webhook_gets_the_contract_fields() {
        let d = due(
            NotifyKind::Webhook,
            NotifyEvent::Waiting,
            Some("trust?\x1b[0m"),
        );
        let b = webhook_body(&d, "http://lab/runs/7");
        expect_test::expect![[r#"{"event":"waiting","run":7,"repo":"demo","state":"waiting","phase":"working","reason":"trust? [0m","at":"1970-01-01T00:00:00.000Z","url":"http://lab/runs/7","pull_request":null,"outcome":null,"issue":null}"#]]
            .assert_eq(&b.to_string());
    }

    #[test]
    fn slack_text_is_escaped_and_links_the_run() {
        let d = due(
            NotifyKind::Slack,
            NotifyEvent::Waiting,
            Some("<!channel> & co"),
        );
        expect_test::expect![[r#"
            <http://lab/runs/7|lab: run 7 of demo is waiting for you>
            &lt;!channel&gt; &amp; co"#]]
        .assert_eq(&slack_text(&d, "http://lab/runs/7"));
    }

    #[test]
    fn header_values_are_plain_ascii() {
        assert_eq!(header_safe("run é\n1"), "run ??1");
    }
}
