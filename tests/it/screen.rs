//! A run's screen as its CLI drew it (`GET /runs/{id}/screen`), and typing
//! into a run (`POST /runs/{id}/input`, `labctl send`).

use std::path::Path;

use serde_json::{Value, json};

use crate::on_both;
use crate::support::agent::{self, write_script};
use crate::support::{Backend, TestServer, id, wait};

/// A run whose agent runs `body` (sh) and then waits.
pub async fn scripted(s: &TestServer, name: &str, body: &str) -> Value {
    let script = s.tmp().join(format!("{name}.sh"));
    write_script(&script, &format!("{body}\nsleep 100000\n"));
    s.start_run("r", &format!("FAKE_RUN={}", script.display()))
        .await
}

/// What `tmux capture-pane -p` shows of the run's pane.
fn capture(run: &Value) -> String {
    let socket = Path::new(run["tmux_socket"].as_str().unwrap());
    let target = format!("={}:", run["session"].as_str().unwrap());
    agent::tmux(socket, &["capture-pane", "-p", "-t", &target])
}

/// The screen's rows without the blank ones at the bottom.
fn rows(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(|l| l.trim_end().to_owned()).collect();
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

/// A TUI-like drawing: a clear, text placed out of order by cursor moves,
/// a spinner redrawn in place, colours, a line erased and rewritten.
pub const DRAW: &str = r#"printf '\033[2J\033[H'
printf '\033[3;10Hworld\033[3;1Hhello,'
printf '\033[5;1H\033[1;32m✽ thinking\033[0m'
printf '\r\033[1;32m✻ Thinking… (esc to interrupt)\033[0m'
printf '\033[7;1Hold line\r\033[Knew line'
printf '\033[9;1H\033[38;5;196m> \033[48;2;10;20;30mDo you want to proceed?\033[0m'
echo "$0" > "$FAKE_REC/drawn""#;

async fn the_screen_is_what_tmux_shows(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = scripted(&s, "draw", DRAW).await;
    let rid = id(&run);
    s.record(rid, "drawn").await;
    let path = format!("/api/v1/runs/{rid}/screen");
    // The log reaches lab through the pane's pipe: wait for the last word.
    let shot = wait::until("the screen drawn", wait::secs(10), async || {
        let v = s.get(&path).await.ok();
        v["text"]
            .as_str()
            .is_some_and(|t| t.contains("Do you want to proceed?"))
            .then_some(v)
    })
    .await;
    assert_eq!(shot["rows"], 50);
    assert_eq!(shot["cols"], 200);
    // (The question on screen may already have made it `waiting`.)
    assert!(
        shot["state"] == "running" || shot["state"] == "waiting",
        "{}",
        shot["state"]
    );
    let text = shot["text"].as_str().unwrap();
    assert_eq!(text.split('\n').count(), 50, "one line per row");
    let got = rows(text);
    assert_eq!(got, rows(&capture(&run)), "as tmux capture-pane shows it");
    assert_eq!(got[2], "hello,   world");
    assert_eq!(got[4], "✻ Thinking… (esc to interrupt)");
    assert_eq!(got[6], "new line");
    assert!(!text.contains("old line") && !text.contains("✽"));

    // The log comes from the run's exec shim and the relay (ADR 16, 22):
    // the tmux server starts no pipe process of its own for it.
    let socket = Path::new(run["tmux_socket"].as_str().unwrap());
    let server: i64 = agent::tmux(socket, &["display-message", "-p", "#{pid}"])
        .trim()
        .parse()
        .unwrap();
    let mut children: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i64>().ok())
        .filter_map(|p| {
            let st = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid: i64 = st[st.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()?;
            let argv = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let word = argv.split(|b| *b == 0).nth(1)?.to_vec();
            (ppid == server).then(|| String::from_utf8_lossy(&word).into_owned())
        })
        .collect();
    children.sort();
    assert_eq!(
        children,
        ["__exec", "__relay"],
        "only the run's shim and the relay"
    );
    let html = s.get(&format!("{path}?format=html")).await.ok();
    assert!(html["text"].is_null());
    let html = html["html"].as_str().unwrap();
    assert!(
        html.contains("<span class=\"f2 bo\">✻ Thinking… (esc to interrupt)</span>"),
        "{html}"
    );
    assert!(html.contains("background:#0a141e;"), "{html}");
    let ansi = s.get(&format!("{path}?format=ansi")).await.ok();
    assert!(ansi["ansi"].as_str().unwrap().contains("\u{1b}["));

    // Bad values are named; nothing about the run changes.
    for (q, field) in [
        ("format=png", "format"),
        ("history=-1", "history"),
        ("nope=1", ""),
    ] {
        let e = s.get(&format!("{path}?{q}")).await.expect(400);
        let msg = e.to_string();
        assert!(msg.contains(field), "{q}: {e}");
    }
    s.get("/api/v1/runs/999999/screen").await.expect(404);
    s.get("/api/v1/runs/abc/screen").await.expect(404);
    s.stop().await;
}

/// The agent's terminal has the pane's size and follows it when the pane is
/// resized: the exec shim passes `SIGWINCH` on (ADR 16).
async fn the_agent_s_terminal_follows_the_pane(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = scripted(
        &s,
        "size",
        r#"while :; do stty size > "$FAKE_REC/size.new"; mv "$FAKE_REC/size.new" "$FAKE_REC/size"; sleep 0.1; done"#,
    )
    .await;
    let rid = id(&run);
    let size = s.dir.path().join(format!("records/{rid}/size"));
    let seen = async |want: &str| {
        wait::until(
            format!("the agent to see {want}"),
            wait::secs(10),
            async || {
                std::fs::read_to_string(&size)
                    .ok()
                    .filter(|t| t.trim() == want)
            },
        )
        .await
    };
    seen("50 200").await;
    let socket = Path::new(run["tmux_socket"].as_str().unwrap());
    let target = format!("={}:", run["session"].as_str().unwrap());
    agent::tmux(
        socket,
        &["resize-window", "-t", &target, "-x", "120", "-y", "40"],
    );
    seen("40 120").await;
    s.stop().await;
}

async fn history_keeps_what_scrolled_off(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = scripted(
        &s,
        "lines",
        r#"i=1; while [ $i -le 120 ]; do echo "line $i"; i=$((i+1)); done; echo > "$FAKE_REC/done""#,
    )
    .await;
    let rid = id(&run);
    s.record(rid, "done").await;
    // A run nobody looked at has no emulator: its bytes cost nothing.
    assert_eq!(s.runner().screens().kept(), 0);
    let path = format!("/api/v1/runs/{rid}/screen");
    let v = wait::until("line 120 on screen", wait::secs(10), async || {
        let v = s.get(&format!("{path}?history=2000")).await.ok();
        v["text"]
            .as_str()
            .is_some_and(|t| t.contains("line 120"))
            .then_some(v)
    })
    .await;
    assert_eq!(s.runner().screens().kept(), 1);
    let text = v["text"].as_str().unwrap();
    let history = v["history"].as_u64().unwrap() as usize;
    assert!(history > 70, "{history}");
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), history + 50);
    // Every line once, in order, however many screens they took.
    let numbered: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("line "))
        .collect();
    let want: Vec<String> = (1..=120).map(|i| format!("line {i}")).collect();
    assert_eq!(numbered, want);
    s.stop().await;
}

/// An agent that records each line it reads, as its terminal gives it.
pub const READER: &str =
    r#"while IFS= read -r line; do printf '%s\n' "$line" >> "$FAKE_REC/typed"; done"#;

async fn input_is_typed_as_it_is(b: Backend) {
    let s = TestServer::start(b).await;
    s.add_repo("r").await;
    let run = scripted(
        &s,
        "reader",
        &format!("echo > \"$FAKE_REC/ready\"\n{READER}"),
    )
    .await;
    let rid = id(&run);
    s.record(rid, "ready").await;
    let path = format!("/api/v1/runs/{rid}/input");
    // Text that tmux would read as a command separator, a format, a flag
    // or a key name, were it not sent literally.
    let hostile = [
        "yes, go on",
        "; kill-server ;",
        "\\;",
        "#{pane_pid} $(id) `id`",
        "-t =other Enter",
        "{ display-message hi }",
        "Enter",
        "C-c",
    ];
    for text in hostile {
        let r = s
            .send(
                s.req(reqwest::Method::POST, &path)
                    .json(&json!({"text": text, "keys": ["Enter"]})),
            )
            .await;
        assert_eq!(r.status, 202, "{text}: {}", r.body);
    }
    // A text longer than one tmux call carries, in pieces, in order.
    // (Lines shorter than a terminal's line buffer, 4095 bytes.)
    let long: String = (0..60)
        .map(|i| format!("{i:02} {}", "é".repeat(50)))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(long.len() > 4096);
    s.post(&path, json!({"text": long, "keys": ["Enter"]}))
        .await
        .expect(202);
    // Two lines in one text, then Enter.
    s.post(&path, json!({"text": "two\nlines", "keys": ["Enter"]}))
        .await
        .expect(202);
    let want: String = hostile.iter().map(|t| format!("{t}\n")).collect::<String>()
        + long.as_str()
        + "\ntwo\nlines\n";
    let typed = wait::until("every line typed", wait::secs(10), async || {
        let got = String::from_utf8(s.record(rid, "typed").await).unwrap();
        if got == want { Ok(got) } else { Err(got) }
    })
    .await;
    assert_eq!(typed, want);
    // The agent's turn ended (its Stop hook, as Claude Code sends it):
    // idle; a prompt typed with Enter makes it working again.
    s.post(
        &format!("/api/v1/runs/{rid}/hook"),
        json!({"payload": {"hook_event_name": "Stop", "session_id": "s", "stop_hook_active": false}}),
    )
    .await
    .ok();
    let run = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
    assert_eq!(run["agent_state"]["state"], "idle", "{run}");
    s.post(&path, json!({"keys": ["Escape"]})).await.expect(202);
    let run = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
    assert_eq!(
        run["agent_state"]["state"], "idle",
        "a key alone is no prompt"
    );
    s.post(&path, json!({"text": "next task", "keys": ["Enter"]}))
        .await
        .expect(202);
    let run = s.get(&format!("/api/v1/runs/{rid}")).await.ok();
    assert_eq!(run["agent_state"]["state"], "working", "{run}");
    // The session lives on: nothing killed the server.
    assert_eq!(
        s.get(&format!("/api/v1/runs/{rid}")).await.ok()["state"],
        "running"
    );
    // And the screen shows what was typed (the terminal echoes it; the long
    // text scrolled it into the history).
    let screen = s
        .get(&format!("/api/v1/runs/{rid}/screen?history=2000"))
        .await
        .ok();
    assert!(
        screen["text"]
            .as_str()
            .unwrap()
            .contains("#{pane_pid} $(id)"),
        "{screen}"
    );

    // Refused, and nothing typed: unknown keys, control characters, nothing.
    // (What was typed above has all arrived first: "next task" is its last.)
    let before = wait::until("\"next task\" typed", wait::secs(10), async || {
        let got = String::from_utf8_lossy(&s.record(rid, "typed").await).into_owned();
        if got.ends_with("next task\n") {
            Ok(got)
        } else {
            Err(got)
        }
    })
    .await;
    for (body, what) in [
        (json!({"keys": ["F13"]}), "keys[0]"),
        (json!({"keys": ["Enter;"]}), "keys[0]"),
        (json!({"text": "ok", "keys": ["Enter", "enter"]}), "keys[1]"),
        (json!({"text": "a\u{1b}[A"}), "control"),
        (json!({"text": "x".repeat(17_000)}), "16384"),
        (json!({}), "nothing to send"),
        (json!({"text": "", "keys": []}), "nothing to send"),
        (json!({"text": 5}), "text"),
        // The document says text is a string: null is not "no text".
        (json!({"text": null, "keys": ["Enter"]}), "text"),
        (json!({"keys": "Enter"}), "keys"),
    ] {
        let e = s.post(&path, body.clone()).await.expect(400);
        assert!(e.to_string().contains(what), "{body}: {e}");
    }
    let e = s.post(&path, json!({"keys": ["F13"]})).await.expect(400);
    assert!(
        e.to_string().contains("Escape"),
        "names the allowed keys: {e}"
    );
    // Input reaches the agent in order: once a last valid line arrived,
    // anything of the refused requests would have arrived before it.
    s.post(&path, json!({"text": "sentinel", "keys": ["Enter"]}))
        .await
        .expect(202);
    let after = wait::until("the sentinel typed", wait::secs(10), async || {
        let got = String::from_utf8_lossy(&s.record(rid, "typed").await).into_owned();
        if got.ends_with("sentinel\n") {
            Ok(got)
        } else {
            Err(got)
        }
    })
    .await;
    assert_eq!(after, format!("{before}sentinel\n"), "nothing typed");

    // A run's own token may not type into it (or any run).
    let token = s.run_token(rid).await;
    let r = s
        .send(
            reqwest::Client::new()
                .post(format!("{}{path}", s.url))
                .bearer_auth(&token)
                .json(&json!({"keys": ["Enter"]})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    s.post("/api/v1/runs/999999/input", json!({"keys": ["Enter"]}))
        .await
        .expect(404);

    // `labctl send`: the text, then Enter.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(["send", &rid.to_string(), "from labctl"])
        .env("LAB_URL", &s.url)
        .env("LAB_DATA_DIR", s.data_dir())
        .env_remove("LAB_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait::until("labctl's line", wait::secs(10), async || {
        let got = String::from_utf8(s.record(rid, "typed").await).unwrap();
        got.ends_with("from labctl\n").then_some(()).ok_or(got)
    })
    .await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_labctl"))
        .args(["send", &rid.to_string(), "--key", "F13"])
        .env("LAB_URL", &s.url)
        .env("LAB_DATA_DIR", s.data_dir())
        .env_remove("LAB_TOKEN")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // An ended run takes no input.
    s.post(&format!("/api/v1/runs/{rid}/stop"), json!(null))
        .await
        .ok();
    let e = s.post(&path, json!({"keys": ["Enter"]})).await.expect(409);
    assert!(e.to_string().contains("stopped"), "{e}");
    s.stop().await;
}

on_both!(
    the_screen_is_what_tmux_shows,
    the_agent_s_terminal_follows_the_pane,
    history_keeps_what_scrolled_off,
    input_is_typed_as_it_is,
);
