//! `labctl writes-hook --root ROOT -- GLOB…`: the `PreToolUse` hook lab
//! gives Claude Code on its file-writing tools when a run has a scope
//! (`writes`, issue 28 §4). A write whose path, or whatever that path leads
//! to, is not in the workspace under one of the globs is refused as it is
//! tried, with a reason naming the path and the globs; the model reads it
//! and retries within scope.
//!
//! Trust boundary: this runs inside the run's sandbox, as a child of the
//! agent's CLI, over the agent's own payload and workspace; lab's host never
//! runs it, and it never talks to lab. It is a help to the agent, not lab's
//! enforcement: an agent can write around it (a shell command, its own
//! settings), and lab's check of the branch (`afk::scope`) holds whatever
//! it says. So it fails open: a payload it cannot read gets no answer and
//! the CLI's own permission flow goes on. It always exits 0.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use globset::GlobSet;
use serde_json::{Value, json};

/// The most of stdin read: a write's payload carries the file's content.
const MAX_READ: u64 = 64 * 1024 * 1024;

/// Reads the hook's payload from stdin and prints Claude Code's deny
/// answer when the write is out of scope; prints nothing otherwise.
pub fn writes_hook(root: &Path, globs: &[String]) {
    let mut text = String::new();
    if std::io::stdin()
        .take(MAX_READ)
        .read_to_string(&mut text)
        .is_err()
    {
        return;
    }
    let Ok(payload) = serde_json::from_str::<Value>(&text) else {
        return;
    };
    if let Some(reason) = refusal(root, globs, &payload) {
        println!("{}", deny(&reason));
    }
}

/// Claude Code's answer that refuses a tool call, with the reason the
/// model is given (2.1.332: `hookSpecificOutput.permissionDecision`).
pub fn deny(reason: &str) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    })
}

/// Why the write `payload` asks for is out of scope; `None` when it is in
/// scope, or when the payload names no file (another tool, a shape this
/// does not know).
pub fn refusal(root: &Path, globs: &[String], payload: &Value) -> Option<String> {
    let input = payload.get("tool_input")?;
    let named = ["file_path", "notebook_path"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .filter(|p| !p.is_empty())?;
    let cwd = payload
        .get("cwd")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| root.to_path_buf());
    let set = crate::knob::glob_set(globs).unwrap_or_else(|_| GlobSet::empty());
    let verdict = Check {
        root,
        set: &set,
        real: &|p: &Path| real(p),
    }
    .path(&cwd.join(named))?;
    let allowed = globs
        .iter()
        .map(|g| format!("`{g}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "lab refused this write: {verdict}. This run may change only paths that match {allowed} \
         (its `writes` scope). Leave that file as it is and make the change within scope; if the \
         issue cannot be resolved within it, say so in your summary."
    ))
}

/// The check of one path against a root and globs; `real` resolves a path
/// through the links that exist (the file system's, or a test's).
struct Check<'a> {
    root: &'a Path,
    set: &'a GlobSet,
    real: &'a dyn Fn(&Path) -> Option<PathBuf>,
}

impl Check<'_> {
    /// What is wrong with writing `path` (absolute); `None`: in scope.
    fn path(&self, path: &Path) -> Option<String> {
        let shown = path.display();
        let Some(lexical) = normal(path) else {
            return Some(format!("`{shown}` is not a path lab can check"));
        };
        let roots = [Some(self.root.to_path_buf()), (self.real)(self.root)];
        let inside = |p: &Path| {
            roots
                .iter()
                .flatten()
                .find_map(|r| p.strip_prefix(r).ok().map(Path::to_path_buf))
        };
        let Some(rel) = inside(&lexical) else {
            return Some(format!("`{shown}` is outside the run's workspace"));
        };
        if !self.allows(&rel) {
            return Some(format!("`{}` is out of scope", rel.display()));
        }
        // A link (the file, or a folder on its way) carries the write to
        // wherever it points: that place must be in scope too.
        // A path the file system cannot resolve (a loop of links) gets no
        // answer: the write fails on its own, and the branch check holds.
        let real = (self.real)(&lexical)?;
        match inside(&real) {
            Some(to) if self.allows(&to) => None,
            Some(to) => Some(format!(
                "`{}` leads to `{}`, which is out of scope",
                rel.display(),
                to.display()
            )),
            None => Some(format!(
                "`{}` leads outside the run's workspace",
                rel.display()
            )),
        }
    }

    fn allows(&self, rel: &Path) -> bool {
        rel.to_str().is_some_and(|p| self.set.is_match(p))
    }
}

/// `path` with `.` and `..` worked out by name, not by the file system
/// (`..` at the root stays there); `None` unless it is absolute.
fn normal(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

/// Where `path` really is: its longest existing ancestor with every link
/// followed, and the rest of it by name. A link that goes round in circles
/// or cannot be read yields `None`.
fn real(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        match std::fs::canonicalize(at) {
            Ok(mut p) => {
                p.extend(rest.iter().rev());
                return Some(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling link is followed to where it points.
                if let Ok(to) = std::fs::read_link(at) {
                    let to = at.parent().unwrap_or(Path::new("/")).join(to);
                    let mut p = real(&normal(&to)?)?;
                    p.extend(rest.iter().rev());
                    return Some(p);
                }
                rest.push(at.file_name()?.to_owned());
                at = at.parent()?;
            }
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(path: &str, cwd: &Path) -> Value {
        json!({
            "session_id": "s", "transcript_path": "/t", "cwd": cwd,
            "hook_event_name": "PreToolUse", "tool_name": "Write",
            "tool_input": {"file_path": path, "content": "x"}
        })
    }

    /// In the pinned CLI's payload shape, over a real workspace with links:
    /// a write in scope passes; one out of scope, out of the workspace, or
    /// through a link (a file or a folder) that leads out of scope is
    /// refused with the path and the globs.
    #[test]
    fn writes_out_of_scope_are_refused_by_path_and_by_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("secrets")).unwrap();
        std::os::unix::fs::symlink("../secrets/key", root.join("src/key")).unwrap();
        std::os::unix::fs::symlink("../secrets", root.join("src/s")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("src/etc")).unwrap();
        let globs = vec!["src/**".to_owned()];
        let ask = |p: &str| refusal(&root, &globs, &payload(p, &root));
        assert_eq!(ask(root.join("src/a.rs").to_str().unwrap()), None);
        assert_eq!(ask("src/new/b.rs"), None, "relative to the cwd");
        let out = ask("README.md").unwrap();
        assert!(
            out.contains("`README.md` is out of scope") && out.contains("`src/**`"),
            "{out}"
        );
        let up = ask("src/../README.md").unwrap();
        assert!(up.contains("`README.md` is out of scope"), "{up}");
        assert!(
            ask("/etc/passwd")
                .unwrap()
                .contains("outside the run's workspace")
        );
        assert!(
            ask("../other/x")
                .unwrap()
                .contains("outside the run's workspace")
        );
        let link = ask("src/key").unwrap();
        assert!(
            link.contains("`src/key` leads to `secrets/key`"),
            "a dangling link is followed: {link}"
        );
        let folder = ask("src/s/new.txt").unwrap();
        assert!(folder.contains("leads to `secrets/new.txt`"), "{folder}");
        assert!(ask("src/etc/x").unwrap().contains("leads outside"));
        let notebook = json!({"cwd": root, "tool_input": {"notebook_path": "n.ipynb"}});
        assert!(refusal(&root, &globs, &notebook).is_some());
        // Not a write lab knows: no answer.
        let bash = json!({"cwd": root, "tool_input": {"command": "echo > README.md"}});
        assert_eq!(refusal(&root, &globs, &bash), None);
    }

    #[test]
    fn the_answer_is_claude_code_s_deny() {
        let v = deny("why");
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert_eq!(v["hookSpecificOutput"]["permissionDecisionReason"], "why");
    }
}
