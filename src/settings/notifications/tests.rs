use super::*;

fn input(kind: &str, url: &str, events: &[&str]) -> EndpointInput {
    EndpointInput {
        kind: kind.into(),
        url: url.into(),
        token: Change::Keep,
        events: events.iter().map(|e| e.to_string()).collect(),
    }
}

const SLACK: &str = "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX";

#[test]
fn a_url_is_shown_redacted_never_whole() {
    assert_eq!(redact(SLACK), "https://hooks.slack.com/…XXXX");
    // A short rest (an ntfy topic) shows nothing of it.
    assert_eq!(redact("https://ntfy.sh/mytopic"), "https://ntfy.sh/…");
    // Credentials and ports: the port is shown, the credentials never.
    assert_eq!(
        redact("http://user:pw@127.0.0.1:8080/hook"),
        "http://127.0.0.1:8080/…"
    );
}

#[test]
fn a_list_is_validated_and_events_are_put_in_order() {
    let got = apply(
        &[],
        &[input("slack", SLACK, &["ended", "waiting", "ended"])],
    )
    .unwrap();
    assert_eq!(got[0].kind, NotifyKind::Slack);
    assert_eq!(
        got[0].events,
        vec![NotifyEvent::Waiting, NotifyEvent::Ended]
    );
    assert_eq!(got[0].events_text(), "waiting,ended");
    assert_eq!(parse_events("ended,waiting").unwrap(), got[0].events);
}

#[test]
fn every_wrong_field_is_named_and_no_secret_is_echoed() {
    let bad = apply(
        &[],
        &[
            input("email", "ftp://x/secret-path", &[]),
            input("webhook", "https://h/x", &["started"]),
            input("ntfy", "https://exa mple.com/x", &["waiting"]),
        ],
    )
    .unwrap_err();
    let fields: Vec<&str> = bad.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "notifications.0.kind",
            "notifications.0.url",
            "notifications.0.events",
            "notifications.1.events.0",
            "notifications.2.url",
        ]
    );
    assert!(
        bad.0[3]
            .message
            .contains("waiting, ended, failed or pr_opened")
    );
    assert!(!bad.to_string().contains("secret-path"));
    assert!(bad.0[1].value.is_none());
}

#[test]
fn at_most_twenty_endpoints() {
    let many = vec![input("webhook", "https://h/x", &["ended"]); MAX_ENDPOINTS + 1];
    let bad = apply(&[], &many).unwrap_err();
    assert_eq!(bad.0[0].field, "notifications");
}

#[test]
fn a_redacted_url_sent_back_keeps_the_stored_url_and_token() {
    let stored = vec![
        Endpoint {
            kind: NotifyKind::Ntfy,
            url: "https://ntfy.sh/topic-one".into(),
            token: Some("tk_1".into()),
            events: vec![NotifyEvent::Waiting],
        },
        Endpoint {
            kind: NotifyKind::Ntfy,
            url: "https://ntfy.sh/topic-two".into(),
            token: None,
            events: vec![NotifyEvent::Ended],
        },
    ];
    // Both redact alike: each keeps its place.
    let shown = redact("https://ntfy.sh/topic-one");
    let got = apply(
        &stored,
        &[
            input("ntfy", &shown, &["waiting", "failed"]),
            input("ntfy", &shown, &["ended"]),
        ],
    )
    .unwrap();
    assert_eq!(got[0].url, stored[0].url);
    assert_eq!(got[0].token.as_deref(), Some("tk_1"));
    assert_eq!(got[1].url, stored[1].url);
    // A redacted URL that stands for nothing is refused.
    let bad = apply(
        &stored,
        &[input("ntfy", "https://other.example/…", &["ended"])],
    )
    .unwrap_err();
    assert_eq!(bad.0[0].field, "notifications.0.url");
    // A token can be cleared; Slack takes none.
    let mut clear = input("ntfy", &shown, &["waiting"]);
    clear.token = Change::Clear;
    assert_eq!(apply(&stored, &[clear]).unwrap()[0].token, None);
    let mut slack = input("slack", SLACK, &["ended"]);
    slack.token = Change::Set("x".into());
    assert_eq!(
        apply(&[], &[slack]).unwrap_err().0[0].field,
        "notifications.0.token"
    );
}
