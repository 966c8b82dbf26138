//! What a pull request's state asks of its agent (ADR 20, ADR 25): the
//! reviews and comments not answered yet, people's words only, and the
//! prompt of the next round. Pure: `forge_follow.rs` reads the forge and
//! owns the following; this says what the reading means.
//!
//! The feedback's text is a reviewer's, typed into the run's own session
//! only; it never reaches another run.

use std::collections::HashSet;

use crate::issues::pull_status::PullStatus;

/// The words in a reviewer's text that ask for a person.
pub const ASK_FOR_A_PERSON: &str = "needs-human";

/// Feedback not answered yet: its key, who, what.
pub(super) struct Feedback {
    pub key: String,
    pub author: String,
    pub text: String,
}

/// What every forge comment of lab's that is not for the agent carries (a
/// review verdict lab posts): never read back as feedback, whoever's
/// account lab uses.
pub(super) const LAB_MARK: &str = "<!-- lab: not feedback -->";

/// The reviews and comments not answered yet. People's words only: not
/// those of lab's own account (who opened the pull request) unless that
/// account is the operator's own (`own_is_a_person`), whose comments are a
/// person's. A dismissed review says nothing; an approval's or a comment
/// review's body is feedback when it says something.
pub(super) fn feedback(
    s: &PullStatus,
    answered: &HashSet<String>,
    own_is_a_person: bool,
) -> Vec<Feedback> {
    let others = |a: &str| !a.is_empty() && (own_is_a_person || !a.eq_ignore_ascii_case(&s.author));
    let reviews = s
        .reviews
        .iter()
        .filter(|r| {
            others(&r.author)
                && !r.body.contains(LAB_MARK)
                && !r.dismissed
                && (r.changes_requested
                    || (r.commented && !r.body.trim().is_empty())
                    || asks_for_a_person(&r.body))
        })
        .map(|r| Feedback {
            key: format!("review:{}", r.id),
            author: r.author.clone(),
            text: r.body.clone(),
        });
    let comments = s
        .comments
        .iter()
        .filter(|c| others(&c.author) && !c.body.trim().is_empty() && !c.body.contains(LAB_MARK))
        .map(|c| {
            let at = match (&c.path, c.line) {
                (Some(p), Some(l)) => format!(" on {p}:{l}"),
                (Some(p), None) => format!(" on {p}"),
                _ => String::new(),
            };
            Feedback {
                key: format!("comment:{}", c.id),
                author: format!("{}{at}", c.author),
                text: c.body.clone(),
            }
        });
    reviews
        .chain(comments)
        .filter(|f| !answered.contains(&f.key))
        .collect()
}

pub(super) fn asks_for_a_person(text: &str) -> bool {
    text.to_ascii_lowercase().contains(ASK_FOR_A_PERSON)
}

/// What the agent is told: the failing checks, then each new piece of
/// feedback, then what to do.
pub(super) fn round_prompt(
    head: &str,
    red: Option<&[crate::issues::pull_status::Failure]>,
    new: &[Feedback],
    round: i64,
    max: i64,
) -> String {
    use super::prompt::{Red, Round, Then};
    super::prompt::round(&Round {
        head,
        round,
        max,
        red: red.map(Red::Forge),
        feedback: new
            .iter()
            .map(|f| (f.author.as_str(), f.text.as_str()))
            .collect(),
        then: Then::Push,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::issues::pull_status::{CheckState, Failure, Mergeable, PullComment, Review};

    fn status() -> PullStatus {
        PullStatus {
            head_sha: "0123456789abcdef".into(),
            author: "lab-bot".into(),
            checks: CheckState::None,
            unreadable: Vec::new(),
            mergeable: Mergeable::Yes,
            reviews: vec![
                Review {
                    id: 1,
                    author: "ana".into(),
                    body: "Please rename x".into(),
                    changes_requested: true,
                    commented: false,
                    dismissed: false,
                },
                Review {
                    id: 2,
                    author: "bo".into(),
                    body: "LGTM".into(),
                    changes_requested: false,
                    commented: false,
                    dismissed: false,
                },
                Review {
                    id: 3,
                    author: "di".into(),
                    body: "Why not a map here?".into(),
                    changes_requested: false,
                    commented: true,
                    dismissed: false,
                },
                Review {
                    id: 4,
                    author: "ed".into(),
                    body: "Change it all".into(),
                    changes_requested: true,
                    commented: false,
                    dismissed: true,
                },
            ],
            comments: vec![
                PullComment {
                    id: 7,
                    author: "lab-bot".into(),
                    body: "mine".into(),
                    path: None,
                    line: None,
                },
                PullComment {
                    id: 8,
                    author: "cy".into(),
                    body: "off by one".into(),
                    path: Some("src/a.rs".into()),
                    line: Some(3),
                },
            ],
            merged: false,
            closed: false,
        }
    }

    #[test]
    fn feedback_is_others_changes_and_comments_once() {
        let s = status();
        let f = feedback(&s, &HashSet::new(), false);
        let keys: Vec<&str> = f.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["review:1", "review:3", "comment:8"]);
        assert_eq!(f[2].author, "cy on src/a.rs:3");
        let f = feedback(&s, &["review:1".to_owned()].into(), false);
        assert_eq!(f.len(), 2);
        // The operator's own account: its comments are a person's.
        let f = feedback(&s, &HashSet::new(), true);
        assert!(f.iter().any(|f| f.key == "comment:7"));
        // Except lab's own verdict comments, whoever's account posts them.
        let mut s = status();
        s.comments[0].body = format!("{LAB_MARK}\nlab's review run 3 approved 0123");
        s.reviews[1].body = format!("{LAB_MARK}\nverdict");
        s.reviews[1].commented = true;
        let f = feedback(&s, &HashSet::new(), true);
        assert!(
            !f.iter()
                .any(|f| f.key == "comment:7" || f.key == "review:2"),
            "{:?}",
            f.iter().map(|f| &f.key).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_prompt_names_the_failures_and_the_reviews() {
        let s = status();
        let f = feedback(&s, &HashSet::new(), false);
        let fails = [Failure {
            name: "ci/test".into(),
            text: "failure: 2 tests failed".into(),
        }];
        let p = round_prompt(&s.head_sha, Some(&fails), &f, 2, 3);
        assert!(p.starts_with("lab: your pull request needs another round (round 2 of 3)."));
        assert!(
            p.contains("Its checks failed on 0123456789ab:\n- ci/test: failure: 2 tests failed")
        );
        assert!(p.contains("Review by ana:\nPlease rename x"), "{p}");
        assert!(asks_for_a_person("Stop here, NEEDS-HUMAN please"));
    }
}
