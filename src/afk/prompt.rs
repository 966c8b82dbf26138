//! lab's AFK prompt. Provider-agnostic: the provider applies its own options
//! to it (ultracode adds its directive) when it builds the command line.

use crate::issues::Issue;

/// The first message of an AFK run. `{branch}` is filled in by the runner
/// once the run's branch is known.
pub fn render(issue: &Issue) -> String {
    format!(
        "You are an autonomous AFK run of lab, with nobody watching. Resolve exactly one issue, \
         open a pull request, and stop.\n\
         \n\
         Issue #{n}: {title}\n\
         \n\
         1. Read the issue and its comments: `labctl issue view {n}`\n\
         2. Work in this checkout. You are on the branch `{{branch}}`; commit your changes there.\n\
         3. When the change is complete, tested and committed, open the pull request:\n   \
            `labctl pr create --title \"<a short title>\" --body \"<what you changed and why; mention issue #{n}>\"`\n\
         4. Then stop. Do not start other work: lab ends the run once the pull request is open.\n\
         \n\
         If you cannot resolve the issue, say why and stop without opening a pull request.",
        n = issue.number,
        title = issue.title.lines().next().unwrap_or(""),
    )
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    #[test]
    fn the_template_names_the_issue_the_commands_and_the_branch() {
        let issue = crate::issues::Issue {
            number: 7,
            title: "Fix the login\nsecond line".into(),
            body: String::new(),
            state: crate::domain::IssueState::Open,
            labels: vec![],
            url: None,
            comments: vec![],
        };
        expect![[r#"
            You are an autonomous AFK run of lab, with nobody watching. Resolve exactly one issue, open a pull request, and stop.

            Issue #7: Fix the login

            1. Read the issue and its comments: `labctl issue view 7`
            2. Work in this checkout. You are on the branch `{branch}`; commit your changes there.
            3. When the change is complete, tested and committed, open the pull request:
               `labctl pr create --title "<a short title>" --body "<what you changed and why; mention issue #7>"`
            4. Then stop. Do not start other work: lab ends the run once the pull request is open.

            If you cannot resolve the issue, say why and stop without opening a pull request."#]]
        .assert_eq(&super::render(&issue));
    }
}
