//! The real agent CLIs (LAB_REAL_CLAUDE, LAB_REAL_CODEX: paths to the
//! pinned binaries; `.ci/run` installs them). When one is not set, a test
//! that needs it says so on stderr, and fails instead under
//! LAB_REQUIRE_REAL_CLIS=1 (CI).

use std::path::PathBuf;

pub fn cli(provider: &str) -> Option<PathBuf> {
    let var = match provider {
        "claude-code" => "LAB_REAL_CLAUDE",
        "codex" => "LAB_REAL_CODEX",
        other => panic!("no real CLI for {other}"),
    };
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.exists() => Some(p),
        _ => {
            assert!(
                std::env::var_os("LAB_REQUIRE_REAL_CLIS").is_none(),
                "LAB_REQUIRE_REAL_CLIS is set but {var} does not name a binary"
            );
            eprintln!("SKIPPED: {var} is not set (see .ci/run)");
            None
        }
    }
}
