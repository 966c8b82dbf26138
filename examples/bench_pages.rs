//! Page benchmarks (issue 4): server render time of the settings and repo
//! pages, page weight, settings-page throughput against /healthz (wrk), and
//! how long a line the agent prints takes to reach an open run page (real
//! headless Chromium).
//!
//! cargo build --release && cargo run --release --example bench_pages
//!
//! Needs wrk, chromium and chromedriver.

use std::process::{Command, Stdio};
use std::time::Duration;

use thirtyfour::prelude::*;

mod common;
use common::{git_repo, median, script, serve};

fn wrk(url: &str, cookie: &str, secs: u32) -> (f64, String) {
    let out = Command::new("wrk")
        .args([
            "-t2",
            "-c64",
            &format!("-d{secs}s"),
            "--latency",
            "-H",
            &format!("Cookie: {cookie}"),
            url,
        ])
        .output()
        .expect("wrk runs (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rps = text
        .lines()
        .find(|l| l.starts_with("Requests/sec"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let p99 = text
        .lines()
        .find(|l| l.trim_start().starts_with("99%"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?")
        .to_owned();
    (rps, p99)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    lab::init_tls();
    let tmp = tempfile::Builder::new()
        .prefix("lab-bench-")
        .tempdir()
        .unwrap();
    let t = tmp.path();
    // An agent that prints a timestamped line every 100 ms.
    let agent = t.join("agent");
    script(
        &agent,
        "#!/bin/sh\nn=0\nwhile :; do n=$((n+1)); echo \"line $n $(date +%s%N)\"; sleep 0.1; done\n",
    );
    let repo = t.join("repo");
    git_repo(&repo);
    let (mut child, api) = serve(t, &agent).await;
    let (base, token, http) = (api.url.clone(), api.token.clone(), api.http.clone());
    http.post(format!("{base}/api/v1/repos"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"name": "web", "path": repo}))
        .send()
        .await
        .unwrap();
    let login = http
        .post(format!("{base}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&next=/runs"))
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();

    println!("## Render time and weight\n");
    println!(
        "| page | median render | HTML | + CSS + JS | gzipped |\n| --- | --- | --- | --- | --- |"
    );
    let css = http
        .get(format!("{base}{}", lab::web::asset("app.css")))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    let js = http
        .get(format!("{base}{}", lab::web::asset("app.js")))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    for page in ["/settings", "/repos/web", "/runs", "/runs/new"] {
        let mut renders = Vec::new();
        let mut html = 0;
        for _ in 0..200 {
            let r = http
                .get(format!("{base}{page}"))
                .header("cookie", &cookie)
                .send()
                .await
                .unwrap();
            let timing = r.headers()["server-timing"].to_str().unwrap().to_owned();
            renders.push(
                timing
                    .trim_start_matches("render;dur=")
                    .parse::<f64>()
                    .unwrap(),
            );
            html = r.bytes().await.unwrap().len();
        }
        let gz = Command::new("sh")
            .arg("-c")
            .arg(format!("curl -s --compressed -o /dev/null -w '%{{size_download}}' -H 'Accept-Encoding: gzip' -H 'Cookie: {cookie}' {base}{page}"))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        println!(
            "| {page} | {:.3} ms | {:.1} KB | {:.1} KB | {} B |",
            median(&mut renders),
            html as f64 / 1024.0,
            (html + css + js) as f64 / 1024.0,
            gz
        );
    }

    println!("\n## Throughput (wrk -t2 -c64, 8 s each, alternated)\n");
    println!(
        "| round | /healthz req/s | /settings req/s | ratio | /settings p99 |\n| --- | --- | --- | --- | --- |"
    );
    for round in 1..=3 {
        let (h, _) = wrk(&format!("{base}/healthz"), &cookie, 8);
        let (s, p99) = wrk(&format!("{base}/settings"), &cookie, 8);
        println!("| {round} | {h:.0} | {s:.0} | {:.2} | {p99} |", s / h);
    }

    println!("\n## Live output\n");
    let run: serde_json::Value = http
        .post(format!("{base}/api/v1/runs"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"repo": "web"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = run["id"].as_i64().unwrap();
    let port_d = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut driver_proc = Command::new("chromedriver")
        .arg(format!("--port={port_d}"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut caps = DesiredCapabilities::chrome();
    caps.set_binary("/usr/bin/chromium").unwrap();
    let profile = tempfile::tempdir().unwrap();
    for a in [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--no-first-run",
    ] {
        caps.add_arg(a).unwrap();
    }
    caps.add_arg(&format!("--user-data-dir={}", profile.path().display()))
        .unwrap();
    let driver = WebDriver::new(&format!("http://127.0.0.1:{port_d}"), caps)
        .await
        .unwrap();
    driver.goto(&base).await.unwrap();
    let value = cookie.split_once('=').unwrap().1.to_owned();
    driver
        .add_cookie(thirtyfour::Cookie::new("lab_session", value))
        .await
        .unwrap();
    driver.goto(format!("{base}/runs/{id}")).await.unwrap();
    // Record when each line's text arrives in the page.
    driver
        .execute(
            "window.arrivals = []; new MutationObserver((ms) => { const now = performance.timeOrigin + performance.now(); \
             for (const m of ms) for (const n of m.addedNodes) window.arrivals.push([n.textContent, now]); })\
             .observe(document.getElementById('output'), {childList: true});",
            vec![],
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(13)).await;
    let arrivals = driver
        .execute("return window.arrivals;", vec![])
        .await
        .unwrap();
    let mut lat = Vec::new();
    for a in arrivals.json().as_array().unwrap() {
        let (text, at) = (a[0].as_str().unwrap(), a[1].as_f64().unwrap());
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            if parts.next() == Some("line")
                && let Some(ns) = parts.nth(1).and_then(|v| v.parse::<f64>().ok())
            {
                lat.push(at - ns / 1e6);
            }
        }
    }
    let n = lat.len();
    let med = median(&mut lat);
    println!(
        "{n} lines printed while the page was open: median {med:.0} ms from the agent's echo to the page, p90 {:.0} ms, max {:.0} ms",
        lat[n * 9 / 10],
        lat[n - 1]
    );
    let _ = driver.quit().await;
    let _ = driver_proc.kill();
    let _ = driver_proc.wait();
    let _ = Command::new("tmux")
        .arg("-S")
        .arg(t.join("data/tmux.sock"))
        .arg("kill-server")
        .status();
    let _ = child.kill();
    let _ = child.wait();
}
