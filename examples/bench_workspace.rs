//! The workspace step (issue 12): a run's workspace is now a shared clone
//! with refs of its own; before, it was a git worktree. Both are timed in one
//! invocation, alternated, on the same repository.
//!
//! cargo run --release --example bench_workspace [ROUNDS] [FILES]
//!
//! The repository has FILES files of 2 KiB in 20 folders (default 2000), so
//! the checkout, which both steps pay, weighs as it does in a real project.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use lab::domain::Change;
use lab::repo::{self, RepoPatch};
use lab::run::workspace::Workspaces;

mod common;
use common::median;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.com")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.com")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let files: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("repo");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    let body = "x".repeat(2048);
    for i in 0..files {
        let dir = src.join(format!("d{}", i % 20));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n{body}")).unwrap();
    }
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-q", "-m", "files"]);
    let mut repo = repo::create(&RepoPatch {
        name: Change::Set("bench".into()),
        path: Change::Set(src.to_string_lossy().into_owned()),
        ..RepoPatch::default()
    })
    .unwrap();
    repo.id = 1;
    let data = t.path().join("data");
    let workspaces = Workspaces::new(&data);
    let wt_root = t.path().join("worktrees");
    std::fs::create_dir_all(&wt_root).unwrap();
    let (mut worktree, mut clone) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        // Today's step before this change: git worktree add.
        let path = wt_root.join(i.to_string());
        let began = Instant::now();
        git(
            &src,
            &[
                "worktree",
                "add",
                "--quiet",
                "-b",
                &format!("wt-{i}"),
                &path.to_string_lossy(),
                "main",
            ],
        );
        worktree.push(began.elapsed().as_secs_f64() * 1e3);
        // lab's step now: a shared clone and its branch.
        let began = Instant::now();
        workspaces
            .create(&repo, i as i64 + 1, &format!("lab/run-{}", i + 1))
            .await
            .unwrap();
        clone.push(began.elapsed().as_secs_f64() * 1e3);
    }
    let (w, c) = (median(&mut worktree), median(&mut clone));
    println!("| step ({files} files, {rounds} rounds, alternated) | median |");
    println!("| --- | --- |");
    println!("| git worktree add (before) | {w:.2} ms |");
    println!(
        "| shared clone + checkout (now) | {c:.2} ms = **{:.2}×** the worktree |",
        c / w
    );
}
