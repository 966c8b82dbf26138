//! `labctl notify test|list|add|remove` (also under `labctl settings`):
//! the notification endpoints.
//!
//! lab never shows an endpoint's URL or token, so `add` and `remove` send
//! the list back as lab showed it (redacted URLs keep the stored ones), with
//! one endpoint more or less.

use clap::Subcommand;
use serde::Serialize;

use super::client::{CliError, CliResult, Client, EmptyObject};
use super::output;
use crate::http::settings::{NotificationBody, SettingsBody};
use crate::notifications::TestSent;

#[derive(Subcommand)]
pub enum NotifyCommand {
    /// Send a test notification to every endpoint and print what each
    /// answered (exit 1 when one did not take it).
    Test {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// List the endpoints (URLs redacted; tokens never shown).
    List {
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Add an endpoint.
    Add {
        /// webhook (JSON), ntfy (a topic URL) or slack (an incoming webhook).
        #[arg(long)]
        kind: String,
        /// The endpoint's URL (a secret: lab never shows it back whole).
        #[arg(long)]
        url: String,
        /// An event to send: waiting, ended, failed or pr_opened. Repeatable;
        /// default: all four.
        #[arg(long = "event", value_name = "EVENT")]
        events: Vec<String>,
        /// Sent as `Authorization: Bearer …` (webhook and ntfy); never shown
        /// back. (`--token` is labctl's own token to lab.)
        #[arg(long = "endpoint-token", value_name = "TOKEN")]
        endpoint_token: Option<String>,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
    /// Remove the endpoint numbered N in `labctl settings notify list`.
    Remove {
        /// Its number in `labctl notify list`.
        n: usize,
        /// Print lab's answer as JSON (errors too: `{"error": …}` on stdout).
        #[arg(long)]
        json: bool,
    },
}

const ALL: [&str; 4] = ["waiting", "ended", "failed", "pr_opened"];

/// One endpoint of the list labctl sends back (lab's
/// `NotificationPatchBody`): an endpoint as lab showed it, or a new one.
#[derive(Serialize)]
struct Endpoint {
    kind: String,
    /// A new endpoint's URL, or the redacted one lab showed (which keeps
    /// the stored URL and token).
    url: String,
    events: Vec<String>,
    /// A new endpoint's token; absent keeps the stored one.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
}

impl From<&NotificationBody> for Endpoint {
    fn from(e: &NotificationBody) -> Self {
        Endpoint {
            kind: e.kind.to_string(),
            url: e.url.clone(),
            events: e.events.iter().map(ToString::to_string).collect(),
            token: None,
        }
    }
}

/// The settings change `add` and `remove` send: the whole list.
#[derive(Serialize)]
struct NotificationsChange {
    notifications: Vec<Endpoint>,
}

pub async fn run(client: &Client, cmd: NotifyCommand) -> CliResult<()> {
    if let NotifyCommand::Test { json } = cmd {
        return test(client, json).await;
    }
    let shown: SettingsBody = client.get("/api/v1/settings").await?;
    // As lab showed them: the redacted URL stands for the stored one, and
    // an absent token keeps the stored token.
    let mut list: Vec<Endpoint> = shown.notifications.iter().map(Endpoint::from).collect();
    let as_json = match cmd {
        NotifyCommand::Test { .. } => unreachable!("handled above"),
        NotifyCommand::List { json } => {
            show(&shown, json);
            return Ok(());
        }
        NotifyCommand::Add {
            kind,
            url,
            events,
            endpoint_token,
            json,
        } => {
            let events = if events.is_empty() {
                ALL.iter().map(|e| e.to_string()).collect()
            } else {
                events
            };
            list.push(Endpoint {
                kind,
                url,
                events,
                token: endpoint_token,
            });
            json
        }
        NotifyCommand::Remove { n, json } => {
            if n == 0 || n > list.len() {
                return Err(CliError::invalid(format!(
                    "there is no endpoint {n}: `labctl settings notify list` numbers them from 1 to {}",
                    list.len()
                )));
            }
            list.remove(n - 1);
            json
        }
    };
    let v: SettingsBody = client
        .patch(
            "/api/v1/settings",
            &NotificationsChange {
                notifications: list,
            },
        )
        .await?;
    show(&v, as_json);
    Ok(())
}

fn show(settings: &SettingsBody, as_json: bool) {
    let list = &settings.notifications;
    if as_json {
        return output::json(list);
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let events: Vec<&str> = e.events.iter().map(|e| e.as_str()).collect();
            vec![
                (i + 1).to_string(),
                e.kind.to_string(),
                events.join(","),
                e.url.clone(),
                if e.token_set { "set" } else { "-" }.to_owned(),
            ]
        })
        .collect();
    if rows.is_empty() {
        println!("no notification endpoints (add one with `labctl settings notify add`)");
        return;
    }
    output::table(&["#", "KIND", "EVENTS", "URL", "TOKEN"], &rows);
}

/// `labctl notify test`: what each endpoint said to a test notification.
async fn test(client: &Client, json: bool) -> CliResult<()> {
    let sent: Vec<TestSent> = client
        .post("/api/v1/notifications/test", &EmptyObject {})
        .await?;
    if json {
        output::json(&sent);
    } else if sent.is_empty() {
        println!("no notification endpoints (add one with `labctl notify add`)");
    } else {
        let rows: Vec<Vec<String>> = sent
            .iter()
            .enumerate()
            .map(|(i, t)| {
                vec![
                    (i + 1).to_string(),
                    t.url.clone(),
                    t.status
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "-".into()),
                    t.error.clone().unwrap_or_else(|| "ok".into()),
                ]
            })
            .collect();
        output::table(&["#", "URL", "STATUS", "RESULT"], &rows);
    }
    let failed = sent.iter().filter(|t| t.error.is_some()).count();
    if failed > 0 && json {
        return Err(CliError::quiet(super::Exit::Failure));
    }
    if failed > 0 {
        return Err(CliError::failure(format!(
            "{failed} of {} endpoint(s) did not take the test",
            sent.len()
        )));
    }
    Ok(())
}
