//! Diffs, pure: git's output in (`--numstat -z` for the files, the unified
//! patch for their hunks), [`Diff`] out, bounded in size; and a file's patch
//! read as hunks of numbered lines for pages and terminals.
//!
//! File names come only from the NUL-separated numstat (never from the
//! patch's headers, which quote some names and not others): a name with
//! spaces, tabs, quotes or newlines is read as it is. The patch gives each
//! file its status and its hunks, in the same order as the numstat.
//!
//! Invariant: no IO; a file's patch is at most [`Limits::file`] bytes and a
//! diff's patches at most [`Limits::total`], cut at a line's end and marked
//! `truncated`.

mod hunks;

pub use hunks::{Hunk, Line, LineKind, changed_spans, hunks};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How much patch text a diff keeps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of one file's patch.
    pub file: usize,
    /// Bytes of all the patches together.
    pub total: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            file: 512 * 1024,
            total: 8 * 1024 * 1024,
        }
    }
}

/// A diff between two trees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Diff {
    /// The commit the diff starts from (the merge base with the default branch).
    pub base: String,
    /// The commit it goes to (for a live run, its branch's last commit: the
    /// work tree's changes are included on top of it, see `work_tree`).
    pub head: String,
    /// Whether uncommitted and untracked files of a live run's workspace are
    /// included.
    pub work_tree: bool,
    pub files: Vec<FileDiff>,
    /// Whether any file's patch was cut short (or left out) by the size limits.
    pub truncated: bool,
}

impl Diff {
    pub fn added(&self) -> u64 {
        self.files.iter().map(|f| f.added).sum()
    }
    pub fn removed(&self) -> u64 {
        self.files.iter().map(|f| f.removed).sum()
    }
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileDiff {
    /// Its path after the change (as git stores it; bytes that are not
    /// UTF-8 are shown as U+FFFD).
    pub path: String,
    /// Its path before, for a renamed file.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// Lines added (0 for a binary file).
    pub added: u64,
    /// Lines removed (0 for a binary file).
    pub removed: u64,
    pub binary: bool,
    /// The unified diff's hunks (from the first `@@`), empty for a binary
    /// file or a change of mode or name only.
    pub patch: String,
    /// Whether `patch` was cut short by the size limits.
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    Renamed,
}

impl FileStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FileStatus::Added => "added",
            FileStatus::Modified => "modified",
            FileStatus::Deleted => "deleted",
            FileStatus::Renamed => "renamed",
        }
    }
}

/// One numstat record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stat {
    added: Option<u64>,
    removed: Option<u64>,
    path: String,
    old_path: Option<String>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Reads `git diff --numstat -z` (renames as `A\tR\t\0old\0new\0`).
fn numstat(raw: &[u8]) -> Vec<Stat> {
    let mut fields = raw.split(|&b| b == 0);
    let mut out = Vec::new();
    while let Some(f) = fields.next() {
        if f.is_empty() {
            continue;
        }
        let mut parts = f.splitn(3, |&b| b == b'\t');
        let (Some(a), Some(r), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u64>().ok();
        let (path, old_path) = if rest.is_empty() {
            let old = fields.next().map(text);
            (fields.next().map(text).unwrap_or_default(), old)
        } else {
            (text(rest), None)
        };
        out.push(Stat {
            added: num(a),
            removed: num(r),
            path,
            old_path,
        });
    }
    out
}

/// What one file's part of the patch says besides its hunks.
struct Part<'a> {
    status: FileStatus,
    binary: bool,
    hunks: &'a [u8],
}

/// Splits a patch into its files' parts: each starts at a line `diff --git `
/// (a hunk's lines all start with ` `, `+`, `-` or `\`, and git quotes a
/// name holding a line break, so no other line can).
fn parts(patch: &[u8]) -> Vec<Part<'_>> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < patch.len() {
        if patch[at..].starts_with(b"diff --git ") {
            starts.push(at);
        }
        at = match patch[at..].iter().position(|&b| b == b'\n') {
            Some(i) => at + i + 1,
            None => patch.len(),
        };
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &s)| part(&patch[s..starts.get(i + 1).copied().unwrap_or(patch.len())]))
        .collect()
}

fn part(chunk: &[u8]) -> Part<'_> {
    let mut status = FileStatus::Modified;
    let mut binary = false;
    let mut at = 0;
    let mut hunks_at = chunk.len();
    while at < chunk.len() {
        let line = &chunk[at..];
        if line.starts_with(b"@@") {
            hunks_at = at;
            break;
        }
        if line.starts_with(b"new file mode") {
            status = FileStatus::Added;
        } else if line.starts_with(b"deleted file mode") {
            status = FileStatus::Deleted;
        } else if line.starts_with(b"rename from") {
            status = FileStatus::Renamed;
        } else if line.starts_with(b"Binary files ") || line.starts_with(b"GIT binary patch") {
            binary = true;
        }
        at = match line.iter().position(|&b| b == b'\n') {
            Some(i) => at + i + 1,
            None => chunk.len(),
        };
    }
    Part {
        status,
        binary,
        hunks: &chunk[hunks_at..],
    }
}

/// At most `max` bytes of `b`, cut after a line's end (or at a character's
/// boundary when one line is longer), and whether it was cut.
fn bounded(b: &[u8], max: usize) -> (String, bool) {
    if b.len() <= max {
        return (text(b), false);
    }
    let cut = match b[..max].iter().rposition(|&c| c == b'\n') {
        Some(i) => i + 1,
        None => max,
    };
    let mut s = text(&b[..cut]);
    if cut == max {
        // Maybe in the middle of a character: drop a partial one.
        while s.ends_with('\u{FFFD}') {
            s.pop();
        }
    }
    (s, true)
}

/// Builds a diff from git's numstat and patch of the same two trees.
/// `patch_cut` says that git's patch output was stopped early (at the
/// total limit): its last file, and every file after it, are truncated.
pub fn parse(
    base: &str,
    head: &str,
    numstat_z: &[u8],
    patch: &[u8],
    patch_cut: bool,
    limits: Limits,
) -> Diff {
    let stats = numstat(numstat_z);
    let parts = parts(patch);
    let mut budget = limits.total;
    let mut truncated = false;
    let files = stats
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let p = parts.get(i);
            let last = patch_cut && (p.is_none() || i + 1 >= parts.len());
            let binary = p.is_some_and(|p| p.binary) || (s.added.is_none() && s.removed.is_none());
            let status = match p {
                Some(p) => p.status,
                None if s.old_path.is_some() => FileStatus::Renamed,
                None => FileStatus::Modified,
            };
            let raw = p.map_or(&[][..], |p| p.hunks);
            let (patch, cut) = bounded(raw, limits.file.min(budget));
            budget -= patch.len().min(budget);
            let file_cut = cut || last;
            truncated |= file_cut;
            FileDiff {
                path: s.path,
                old_path: s.old_path,
                status,
                added: s.added.unwrap_or(0),
                removed: s.removed.unwrap_or(0),
                binary,
                patch,
                truncated: file_cut,
            }
        })
        .collect();
    Diff {
        base: base.to_owned(),
        head: head.to_owned(),
        work_tree: false,
        files,
        truncated,
    }
}

#[cfg(test)]
mod tests;
