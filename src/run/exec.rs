//! The exec shim: `lab __exec <launch file>`, the program every run's pane
//! starts with.
//!
//! tmux limits a client's command line to ~16 KB and reads some arguments as
//! formats or separators. So the agent's argv and environment never travel
//! through tmux: lab writes them to a launch file (mode 0600, in the run's
//! folder), tmux runs the shim with only lab-made arguments, and the shim
//! reads the file, deletes it (it holds the run's token), sets the exact
//! environment, changes into the workspace, and replaces itself with the
//! agent. The pane's process id is the agent's.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Everything the shim needs to start an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Variables set on top of the pane's environment.
    pub env: BTreeMap<String, String>,
    /// Variables removed from the pane's environment.
    pub env_remove: Vec<String>,
    /// Folders put in front of `PATH` (where `labctl` lives).
    pub path_prepend: Vec<PathBuf>,
}

impl Launch {
    /// Writes the launch file, readable by this user only.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        // No fsync: the shim reads the file within milliseconds, and a crash
        // before that fails the run anyway.
        f.write_all(&json)
    }

    /// The environment the agent gets, from the environment the shim has.
    /// No `LAB_*` variable is inherited (lab's database URL, tokens and forge
    /// credentials live there): a run sees only the ones lab sets for it.
    pub fn environment(
        &self,
        inherited: impl Iterator<Item = (String, String)>,
    ) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = inherited
            .filter(|(k, _)| !k.starts_with("LAB_") && !self.env_remove.contains(k))
            .collect();
        if !self.path_prepend.is_empty() {
            let mut parts: Vec<String> = self
                .path_prepend
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if let Some(old) = env.get("PATH") {
                parts.push(old.clone());
            }
            env.insert("PATH".into(), parts.join(":"));
        }
        env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }
}

/// The shim's body. Returns only on failure, with the exit code to use.
pub fn exec_main(launch_file: &Path) -> i32 {
    let launch: Launch = match std::fs::read(launch_file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "lab: cannot read the launch file {}: {e}",
                launch_file.display()
            );
            return 126;
        }
    };
    let _ = std::fs::remove_file(launch_file);
    if let Err(e) = std::env::set_current_dir(&launch.cwd) {
        eprintln!(
            "lab: cannot enter the workspace {}: {e}",
            launch.cwd.display()
        );
        return 126;
    }
    let env = launch.environment(std::env::vars());
    let err = std::process::Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(&env)
        .exec();
    eprintln!("lab: cannot start {}: {err}", launch.program.display());
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_removes_prepends_and_sets() {
        let l = Launch {
            program: "/bin/true".into(),
            args: vec![],
            cwd: "/".into(),
            env: [("LAB_RUN_ID".to_owned(), "7".to_owned())].into(),
            env_remove: vec!["CLAUDE_CODE_EFFORT_LEVEL".into()],
            path_prepend: vec!["/opt/lab/bin".into()],
        };
        let env = l.environment(
            [
                ("PATH".to_owned(), "/usr/bin".to_owned()),
                ("CLAUDE_CODE_EFFORT_LEVEL".to_owned(), "low".to_owned()),
                ("HOME".to_owned(), "/root".to_owned()),
                (
                    "LAB_DATABASE_URL".to_owned(),
                    "postgres://secret".to_owned(),
                ),
            ]
            .into_iter(),
        );
        assert_eq!(env["PATH"], "/opt/lab/bin:/usr/bin");
        assert_eq!(env["LAB_RUN_ID"], "7");
        assert_eq!(env["HOME"], "/root");
        assert!(!env.contains_key("CLAUDE_CODE_EFFORT_LEVEL"));
        assert!(!env.contains_key("LAB_DATABASE_URL"));
    }
}
