//! Diff benchmark (issue 15): a diff of 5 000 changed lines in 50 files,
//! parsed (`lab::diff::parse`) and rendered as the Changes tab and the pull
//! request page render it (`lab::web::diff_view::render`), beside the
//! baseline of git producing that diff's numstat and patch text, in the
//! same invocation.
//!
//! cargo build --release && cargo run --release --example bench_diff [ROUNDS]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use lab::diff::{Limits, parse};
use lab::web::diff_view::render;

mod common;
use common::{median, pct};

const FILES: usize = 50;
const LINES: usize = 200;
/// Lines changed per file: each is one removed and one added line.
const CHANGED: usize = 50;

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@x")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@x")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    out.stdout
}

fn source(file: usize, changed: bool) -> String {
    (0..LINES)
        .map(|i| {
            if changed && i % (LINES / CHANGED) == 0 {
                format!("    let value_{i} = compute(\"file {file}\", {i}) * 2; // changed\n")
            } else {
                format!("    let value_{i} = compute(\"file {file}\", {i}); // <b>&</b>\n")
            }
        })
        .collect()
}

fn ms(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    for f in 0..FILES {
        std::fs::write(dir.join(format!("f{f:02}.rs")), source(f, false)).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
    git(dir, &["switch", "-q", "-c", "work"]);
    for f in 0..FILES {
        std::fs::write(dir.join(format!("f{f:02}.rs")), source(f, true)).unwrap();
    }
    git(dir, &["commit", "-q", "-am", "work"]);
    let args = |extra: &str| -> Vec<String> {
        vec![
            "diff".into(),
            "--no-color".into(),
            "-M".into(),
            extra.into(),
            "main".into(),
            "work".into(),
            "--".into(),
        ]
    };
    let stat_args = args("--numstat");
    let patch_args = args("-p");
    let run = |a: &[String]| git(dir, &a.iter().map(String::as_str).collect::<Vec<_>>());
    let mut stat_z = stat_args.clone();
    stat_z.insert(3, "-z".into());
    let numstat = run(&stat_z);
    let patch = run(&patch_args);
    let d = parse("main", "work", &numstat, &patch, false, Limits::default());
    assert_eq!(d.files.len(), FILES);
    assert_eq!(d.added() + d.removed(), (FILES * CHANGED * 2) as u64);
    let html = render(&d);

    let (mut git_ms, mut parse_ms, mut render_ms, mut both_ms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        git_ms.push(ms(|| {
            run(&stat_z);
            run(&patch_args);
        }));
        let mut parsed = None;
        parse_ms.push(ms(|| {
            parsed = Some(parse(
                "main",
                "work",
                &numstat,
                &patch,
                false,
                Limits::default(),
            ));
        }));
        let parsed = parsed.unwrap();
        render_ms.push(ms(|| {
            std::hint::black_box(render(&parsed));
        }));
        both_ms.push(ms(|| {
            let d = parse("main", "work", &numstat, &patch, false, Limits::default());
            std::hint::black_box(render(&d));
        }));
    }
    println!(
        "diff: {} files, {} changed lines (+{} −{}), patch {} KiB, page HTML {} KiB, {rounds} rounds\n",
        d.files.len(),
        d.added() + d.removed(),
        d.added(),
        d.removed(),
        patch.len() / 1024,
        html.len() / 1024
    );
    println!("| step | median ms | p99 ms |");
    println!("| --- | --- | --- |");
    for (name, v) in [
        (
            "baseline: git diff --numstat -z + git diff -p (two processes)",
            &mut git_ms,
        ),
        ("parse (lab::diff::parse)", &mut parse_ms),
        ("render (web::diff_view::render)", &mut render_ms),
        ("parse + render", &mut both_ms),
    ] {
        println!("| {name} | {:.3} | {:.3} |", median(v), pct(v, 0.99));
    }
}
