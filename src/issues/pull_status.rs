//! What lab reads of a pull request to follow it (issue 14 §1): its head,
//! its checks folded into one state, the reviews and the people's comments.
//! Built from a forge's answers in `forge/status.rs`; the built-in tracker
//! has none of these (its check is the repo's `check_command`).

/// A pull request as lab follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullStatus {
    /// The commit its checks ran on.
    pub head_sha: String,
    /// Who opened it: lab's own account on a forge (lab opens it with its
    /// token), whose reviews and comments are not feedback (unless that
    /// account is the operator's own, `forge_follow.rs`).
    pub author: String,
    pub checks: CheckState,
    /// The check sources the forge refused to lab, each with why (a
    /// fine-grained GitHub token without the Checks permission gets 403 on
    /// check runs): the others are still read.
    pub unreadable: Vec<String>,
    /// Whether it can be merged into its base as it is.
    pub mergeable: Mergeable,
    pub reviews: Vec<Review>,
    /// Review comments (on a line) and conversation comments, oldest first.
    pub comments: Vec<PullComment>,
    pub merged: bool,
    /// Closed without being merged.
    pub closed: bool,
}

/// Whether a pull request can be merged (GitHub's `mergeable`, computed
/// after a push: `null` meanwhile; Gitea's `mergeable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mergeable {
    Yes,
    /// It conflicts with its base (GitHub's `mergeable_state: dirty`).
    Conflict,
    /// Not known yet.
    Unknown,
}

/// The checks of a head, folded: any red makes it red; else any the agent
/// cannot fix makes it blocked; else any still running makes it pending;
/// else green when there are some.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckState {
    /// None reported (none configured, or not registered yet).
    None,
    Pending,
    Green,
    /// The failures: a line each, the check's name and what it said.
    Red(Vec<Failure>),
    /// Checks that ended in a way no change of the agent's fixes: awaiting
    /// a maintainer's approval (`action_required`), `stale`, `cancelled`.
    Blocked(Vec<Failure>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The check run's name or the status's context.
    pub name: String,
    /// Its conclusion or state, and its description / output title and
    /// summary.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub id: i64,
    pub author: String,
    pub body: String,
    /// GitHub's `CHANGES_REQUESTED`, Gitea's `REQUEST_CHANGES`.
    pub changes_requested: bool,
    /// GitHub's `COMMENTED`, Gitea's `COMMENT`: its body is feedback too.
    pub commented: bool,
    /// Dismissed: it says nothing any more.
    pub dismissed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullComment {
    pub id: i64,
    pub author: String,
    pub body: String,
    /// The file and line a review comment is on.
    pub path: Option<String>,
    pub line: Option<i64>,
}

/// One check as a forge reports it, before folding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum One {
    Pending,
    Green,
    Red(Failure),
    Blocked(Failure),
}

impl CheckState {
    /// Folds single checks into the pull request's state.
    pub fn fold(all: impl IntoIterator<Item = One>) -> CheckState {
        let (mut any, mut pending, mut red, mut blocked) = (false, false, Vec::new(), Vec::new());
        for c in all {
            any = true;
            match c {
                One::Pending => pending = true,
                One::Green => {}
                One::Red(f) => red.push(f),
                One::Blocked(f) => blocked.push(f),
            }
        }
        match () {
            _ if !red.is_empty() => CheckState::Red(red),
            _ if !blocked.is_empty() => CheckState::Blocked(blocked),
            _ if pending => CheckState::Pending,
            _ if any => CheckState::Green,
            _ => CheckState::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(n: &str) -> One {
        One::Red(Failure {
            name: n.into(),
            text: "failure".into(),
        })
    }

    #[test]
    fn red_wins_then_pending_then_green() {
        assert_eq!(CheckState::fold([]), CheckState::None);
        assert_eq!(CheckState::fold([One::Green]), CheckState::Green);
        assert_eq!(
            CheckState::fold([One::Green, One::Pending]),
            CheckState::Pending
        );
        let s = CheckState::fold([One::Pending, red("ci"), One::Green]);
        assert!(matches!(s, CheckState::Red(f) if f.len() == 1 && f[0].name == "ci"));
        let waits = One::Blocked(Failure {
            name: "ci".into(),
            text: "action_required".into(),
        });
        assert!(matches!(
            CheckState::fold([One::Pending, waits.clone()]),
            CheckState::Blocked(_)
        ));
        assert!(matches!(
            CheckState::fold([waits, red("x")]),
            CheckState::Red(_)
        ));
    }
}
