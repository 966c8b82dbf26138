//! Runs: one life of an agent CLI in one tmux session, its workspace, and
//! the loop that keeps run states true.

pub mod workspace;
