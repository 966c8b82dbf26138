//! The usage pass: reads on in each run's transcript from where the last
//! read stopped, and stores the totals (with `usage::Tally`), so requests
//! only read stored numbers and a restart never reads from zero.
//!
//! It reads the live runs of this node, and each run once more after it
//! ended (then marks it done). The transcript is the agent's to write, so it
//! is treated as hostile: opened without following a link (nor one below
//! the CLI's folder), only a regular file, at most [`READ_BUDGET`] bytes a
//! pass, lines capped by `usage::MAX_LINE`.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Runner;
use crate::domain::Run;
use crate::store::{StoreError, UsageRead, now_ms};
use crate::usage::{Format, claude, codex};

/// The most one pass reads of one transcript.
const READ_BUDGET: u64 = 16 << 20;

/// How long after its end a run's transcript is still looked for.
const ENDED_WINDOW_MS: i64 = 3_600_000;

/// The longest rollout first line (`session_meta`) lab reads.
const MAX_META: u64 = 1 << 20;

impl Runner {
    /// One usage pass over this node's runs; returns how many runs' usage
    /// changed. A run whose usage cannot be read or stored is logged and
    /// left for the next pass; the others go on.
    pub async fn tally_usage(&self) -> Result<usize, StoreError> {
        let runs = self
            .store
            .runs_to_tally(&self.cfg.node, now_ms() - ENDED_WINDOW_MS)
            .await?;
        let mut changed = 0;
        for run in runs {
            match self.tally_run(&run).await {
                Ok(true) => changed += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(run = run.id, error = %e, "could not read the run's usage")
                }
            }
        }
        Ok(changed)
    }

    async fn tally_run(&self, run: &Run) -> Result<bool, StoreError> {
        let Some(format) = Format::of(&run.provider) else {
            return Ok(false);
        };
        let before = self.store.usage_read(run.id).await?;
        if before.done {
            return Ok(false);
        }
        let ended = !run.state.is_active();
        let home = self.cli_home(format);
        let run2 = run.clone();
        let start = before.clone();
        let (read, session) = tokio::task::spawn_blocking(move || {
            let mut read = start;
            let mut session = None;
            if read.transcript.is_none() {
                let found = find(format, &home, &run2);
                session = found.as_ref().and_then(|f| f.session.clone());
                read.transcript = found.map(|f| f.path.to_string_lossy().into_owned());
            }
            let at_end = match read.transcript.clone() {
                Some(path) => read_on(format, &home, Path::new(&path), &mut read),
                None => true,
            };
            read.done = ended && at_end;
            (read, session)
        })
        .await
        .unwrap_or_else(|_| (before.clone(), None));
        if let Some(id) = session {
            self.store.set_cli_session_id(run.id, &id).await?;
        }
        if read == before {
            return Ok(false);
        }
        self.store.save_usage_read(run.id, &read).await?;
        Ok(true)
    }

    /// The CLI's own folder as runs see it: its variable in the runs'
    /// environment, else its folder in the agents' home.
    fn cli_home(&self, format: Format) -> PathBuf {
        let (var, default) = format.home();
        let env = super::env::inherited(std::env::vars(), &[var], &self.cfg.run_env);
        match env.get(var).filter(|d| !d.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => self.cfg.agent_home.join(default),
        }
    }
}

/// A transcript found, and the session it names (Codex).
struct Found {
    path: PathBuf,
    session: Option<String>,
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

fn find(format: Format, home: &Path, run: &Run) -> Option<Found> {
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
        let (y, m, d) = civil_date(created_ms + offset * day_ms);
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

/// The year, month and day (UTC) of a time in ms.
fn civil_date(ms: i64) -> (i64, u32, u32) {
    // Howard Hinnant's days-to-civil.
    let z = ms.div_euclid(86_400_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

/// Opens a transcript for reading: a regular file, reached through no link
/// below the CLI's folder (`home`, which may itself be a link the operator
/// made), without blocking (a FIFO planted there opens at once, and is
/// refused).
fn open(home: &Path, path: &Path) -> Option<std::fs::File> {
    let f = open_regular(path)?;
    let rel = path.strip_prefix(home).ok()?;
    let expected = home.canonicalize().ok()?.join(rel);
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        f.as_raw_fd()
    }))
    .ok()?;
    (opened == expected).then_some(f)
}

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

fn first_line(path: &Path) -> Option<Vec<u8>> {
    let f = open_regular(path)?;
    let mut buf = Vec::new();
    f.take(MAX_META).read_to_end(&mut buf).ok()?;
    let end = buf.iter().position(|&b| b == b'\n')?;
    buf.truncate(end);
    Some(buf)
}

/// Reads the transcript on from `read.offset`, whole lines only, at most
/// [`READ_BUDGET`] bytes. Returns whether it reached the end (or cannot
/// read at all).
fn read_on(format: Format, home: &Path, path: &Path, read: &mut UsageRead) -> bool {
    let Some(mut f) = open(home, path) else {
        return true;
    };
    let Ok(len) = f.metadata().map(|m| m.len()) else {
        return true;
    };
    let offset = u64::try_from(read.offset).unwrap_or(0);
    if len < offset {
        // Cut short under lab: what it held was counted; count what comes
        // after the cut.
        read.offset = i64::try_from(len).unwrap_or(i64::MAX);
        return true;
    }
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return true;
    }
    let mut buf = Vec::new();
    if f.take(READ_BUDGET).read_to_end(&mut buf).is_err() {
        return true;
    }
    let used = read.tally.feed(format, &buf);
    read.offset = read.offset.saturating_add(used as i64);
    (buf.len() as u64) < READ_BUDGET
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_days() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(1_764_583_200_000), (2025, 12, 1));
        assert_eq!(civil_date(951_782_400_000), (2000, 2, 29));
        assert_eq!(civil_date(-1), (1969, 12, 31));
    }

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
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(open(&home, &fifo).is_none());
        // The folder itself may be a link the operator made.
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&home, &alias).unwrap();
        assert!(open(&alias, &alias.join("projects/p/s.jsonl")).is_some());
    }

    #[test]
    fn reading_on_counts_only_what_was_appended() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let path = home.join("t.jsonl");
        let prompt = r#"{"type":"user","message":{"role":"user","content":"go"}}"#;
        std::fs::write(&path, format!("{prompt}\n{{\"type\":")).unwrap();
        let mut read = UsageRead::default();
        assert!(read_on(Format::Claude, home, &path, &mut read));
        assert_eq!(read.tally.usage.turns, 1);
        assert_eq!(read.offset as usize, prompt.len() + 1);
        // The partial line is finished, and another added.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write;
        write!(
            f,
            "\"user\",\"message\":{{\"role\":\"user\",\"content\":\"and\"}}}}\n{prompt}\n"
        )
        .unwrap();
        assert!(read_on(Format::Claude, home, &path, &mut read));
        assert_eq!(read.tally.usage.turns, 3);
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(read.offset as u64, len);
        // Nothing new: nothing counted twice.
        assert!(read_on(Format::Claude, home, &path, &mut read));
        assert_eq!(read.tally.usage.turns, 3);
    }
}
