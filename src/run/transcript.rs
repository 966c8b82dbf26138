//! Where a run's transcript is, and opening it safely. The CLI's folder is
//! the agent's to write: a transcript is opened without following a link
//! (nor one below the CLI's folder), only as a regular file, never
//! blocking.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::domain::Run;
use crate::usage::{Format, claude, codex};

/// The longest rollout first line (`session_meta`) lab reads.
const MAX_META: u64 = 1 << 20;

/// A transcript found, and the session it names (Codex).
pub(super) struct Found {
    pub path: PathBuf,
    pub session: Option<String>,
}

/// The workspace as the agent saw it (the sandbox binds its real path), and
/// as lab recorded it.
fn workspace_paths(run: &Run) -> Vec<PathBuf> {
    let Some(ws) = run.workspace.as_deref().map(PathBuf::from) else {
        return Vec::new();
    };
    let mut out = vec![ws.clone()];
    if let Ok(real) = ws.canonicalize()
        && real != ws
    {
        out.push(real);
    }
    out
}

pub(super) fn find(format: Format, home: &Path, run: &Run) -> Option<Found> {
    let cwds = workspace_paths(run);
    match format {
        Format::Claude => {
            let session = run.cli_session_id.as_deref()?;
            cwds.iter().find_map(|cwd| {
                let path = match claude::transcript(home, cwd, session) {
                    Some(p) => p,
                    None => long_project(home, cwd, session)?,
                };
                is_file(&path).then_some(Found {
                    path,
                    session: None,
                })
            })
        }
        Format::Codex => find_rollout(home, &cwds, run.created_at),
    }
}

/// A project folder whose name Claude Code cut and hashed: the one that
/// starts with the cut name and holds the session.
fn long_project(home: &Path, cwd: &Path, session: &str) -> Option<PathBuf> {
    let (prefix, _) = claude::project_dir_name(cwd);
    let prefix = format!("{prefix}-");
    std::fs::read_dir(home.join("projects"))
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path().join(format!("{session}.jsonl")))
        .find(|p| is_file(p))
}

/// The rollout of a Codex session started in one of `cwds` at or after the
/// run was created: looked for in the date folders around its creation (the
/// folders are by local date), earliest session first.
fn find_rollout(home: &Path, cwds: &[PathBuf], created_ms: i64) -> Option<Found> {
    let sessions = home.join("sessions");
    let day_ms = 86_400_000;
    let mut best: Option<(String, Found)> = None;
    for offset in [-1, 0, 1] {
        let (y, m, d) = crate::clock::civil_date(created_ms + offset * day_ms);
        let dir = sessions.join(format!("{y:04}/{m:02}/{d:02}"));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("rollout-") && name.ends_with(".jsonl")) {
                continue;
            }
            let path = e.path();
            let recent = e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .is_some_and(|t| {
                    t.duration_since(std::time::UNIX_EPOCH)
                        .is_ok_and(|d| d.as_millis() as i64 >= created_ms - 60_000)
                });
            if !recent {
                continue;
            }
            let Some(meta) = first_line(&path).and_then(|l| codex::session_meta(&l)) else {
                continue;
            };
            if !cwds.iter().any(|c| Path::new(&meta.cwd) == c) {
                continue;
            }
            if best.as_ref().is_none_or(|(ts, _)| meta.timestamp < *ts) {
                best = Some((
                    meta.timestamp,
                    Found {
                        path,
                        session: Some(meta.id),
                    },
                ));
            }
        }
    }
    best.map(|(_, f)| f)
}

fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

/// Opens a transcript for reading: a regular file, reached through no link
/// below the run's home (the CLI's folder `home` included: the run may have
/// swapped it for a link), without blocking (a FIFO planted there opens at
/// once, and is refused), and no larger than [`MAX_TRANSCRIPT`] is read.
///
/// Host side, over files the agent writes: it follows no link and executes
/// nothing.
pub(super) fn open(home: &Path, path: &Path) -> Option<std::fs::File> {
    let f = open_regular(path)?;
    let rel = path.strip_prefix(home).ok()?;
    // The run's home itself is lab's (a mount point in the sandbox, which
    // the run cannot replace); everything below it is the run's.
    let expected = home
        .parent()?
        .canonicalize()
        .ok()?
        .join(home.file_name()?)
        .join(rel);
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        f.as_raw_fd()
    }))
    .ok()?;
    (opened == expected).then_some(f)
}

/// The most of one transcript lab reads: past it, the run's usage stays
/// what the first [`MAX_TRANSCRIPT`] bytes said.
pub const MAX_TRANSCRIPT: u64 = 1 << 30;

/// A regular file, opened without following a link at its end and without
/// blocking.
fn open_regular(path: &Path) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    f.metadata().ok()?.file_type().is_file().then_some(f)
}

/// A rollout's `session_meta` (its first line), read as any transcript:
/// a regular file, no link at its end.
pub(super) fn first_meta(path: &Path) -> Option<codex::SessionMeta> {
    first_line(path).and_then(|l| codex::session_meta(&l))
}

fn first_line(path: &Path) -> Option<Vec<u8>> {
    let f = open_regular(path)?;
    let mut buf = Vec::new();
    f.take(MAX_META).read_to_end(&mut buf).ok()?;
    let end = buf.iter().position(|&b| b == b'\n')?;
    buf.truncate(end);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_is_read_only_as_a_regular_file_below_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("projects/p")).unwrap();
        let real = home.join("projects/p/s.jsonl");
        std::fs::write(&real, "x\n").unwrap();
        assert!(open(&home, &real).is_some());
        // A link as the file, or below the folder, is not followed.
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "token\n").unwrap();
        let link = home.join("projects/p/l.jsonl");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert!(open(&home, &link).is_none());
        std::os::unix::fs::symlink(dir.path(), home.join("projects/q")).unwrap();
        assert!(open(&home, &home.join("projects/q/secret")).is_none());
        // A FIFO opens without blocking, and is refused.
        let fifo = home.join("projects/p/f.jsonl");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(open(&home, &fifo).is_none());
        // The CLI's folder itself a link (the run may make it one): refused.
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&home, &alias).unwrap();
        assert!(open(&alias, &alias.join("projects/p/s.jsonl")).is_none());
    }
}
