//! lab's AFK prompts: the first message of a run, and the one message of
//! each further round on its pull request. Provider-agnostic: the provider
//! applies its own options to them (ultracode adds its directive) when it
//! builds the command line.
//!
//! Host side of the trust boundary: lab writes these. What they quote
//! (a check's output, reviewers' words) goes to the run's own agent only.

use crate::issues::Issue;
use crate::issues::pull_status::Failure;
use crate::run::check::CheckResult;

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

/// The first message with the knobs' work fragments after it, as one block
/// (issue 27); unchanged, byte for byte, when every knob is at its default.
pub fn with_directives(prompt: String, knobs: &[crate::knob::Resolved]) -> String {
    match crate::knob::prompt_block(crate::knob::Phase::Work, knobs) {
        Some(block) => format!("{prompt}\n\n{block}"),
        None => prompt,
    }
}

/// The first message of a planning run (issue 28 §2): read, plan, submit,
/// with the knobs' plan fragments after it. Its workspace is read-only.
pub fn plan(issue: &Issue, knobs: &[crate::knob::Resolved]) -> String {
    let text = format!(
        "You are a planning run of lab, with nobody watching. Plan how to resolve exactly one \
         issue; do not change any file (this checkout is read-only).\n\
         \n\
         Issue #{n}: {title}\n\
         \n\
         1. Read the issue and its comments: `labctl issue view {n}`\n\
         2. Read the code the issue concerns.\n\
         3. Write the plan: what you will change, in which files, how you will test it, and \
            what you leave out. Submit it (standard input or a file you write under /tmp):\n   \
            `labctl plan submit --file -`\n\
         4. Then end your turn. lab shows the plan for a decision; if it is sent back, you are \
            told why here and submit a revised plan the same way.",
        n = issue.number,
        title = issue.title.lines().next().unwrap_or(""),
    );
    match crate::knob::prompt_block(crate::knob::Phase::Plan, knobs) {
        Some(block) => format!("{text}\n\n{block}"),
        None => text,
    }
}

/// What a planning run is told when its plan was rejected.
pub fn plan_rejected(version: i64, by: &str, reason: &str, round: i64, max: i64) -> String {
    format!(
        "lab: plan version {version} was rejected by {by} (plan round {round} of {max}).\n\n{}\n\n\
         Revise the plan, submit it again with `labctl plan submit --file -`, and end your turn.",
        crate::knob::untrusted("The reason", reason)
    )
}

/// What a planning run that ended its turn without a plan is told, once.
pub const PLAN_MISSING: &str = "lab: your turn ended without a plan. Submit it with \
     `labctl plan submit --file -` (the plan on standard input), then end your turn.";

/// What a work run that ended its turn without a pull request is told,
/// once (issue 40 §2); a second such turn ends the run for a person.
pub const PR_MISSING: &str = "lab: your turn ended without a pull request. If the change is \
     complete, tested and committed, open it now with `labctl pr create --title \"<a short \
     title>\" --body \"<what you changed and why>\"`, then stop. If you cannot resolve the issue, \
     say why in one line and end your turn: lab then hands the issue to a person.";

/// The work run's first message after an approved plan: the work prompt
/// with the plan (the planning run's words, fenced as data).
pub fn with_plan(prompt: String, plan: &crate::domain::Plan) -> String {
    format!(
        "{prompt}\n\nFollow the plan approved for this issue (version {}, approved by {}).\n\n{}",
        plan.version,
        plan.by(),
        crate::knob::untrusted("The plan", &plan.text)
    )
}

/// What a review run is given (issue 28 §3). Every text but lab's own
/// (the plan, the diff, the check's output) is another run's bytes, fenced
/// as data.
pub struct ReviewBrief<'a> {
    pub issue: &'a Issue,
    pub plan: Option<&'a crate::domain::Plan>,
    /// The pull request's base and head commits.
    pub base: &'a str,
    pub head: &'a str,
    /// The diff as text (possibly cut short: `diff_cut`).
    pub diff: &'a str,
    pub diff_cut: bool,
    /// What the checks said (lab's words: `passed`, `no checks`).
    pub checks: &'a str,
    /// This review's round of the pull request and the most there may be.
    pub round: i64,
    pub max: i64,
}

/// The first message of a review run: read the change, judge it, submit
/// a verdict; the knobs' review fragments after it.
pub fn review(b: &ReviewBrief<'_>, knobs: &[crate::knob::Resolved]) -> String {
    let short = |c: &str| c.chars().take(12).collect::<String>();
    let mut text = format!(
        "You are a review run of lab, with nobody watching. Review one pull request that \
         resolves issue #{n}: {title}. Do not change any file (this checkout is read-only); it \
         holds the pull request's head, {head}, and the base is {base} (`git diff {base}..{head}` \
         shows the change).\n\
         \n\
         1. Read the issue: `labctl issue view {n}`\n\
         2. Read the change below and the code around it. Its checks: {checks}. This is review \
            round {round} of at most {max}.\n\
         3. Judge whether the change resolves the issue{plan_too}, correctly and within its \
            scope. Write your verdict as JSON to a file under /tmp and submit it:\n   \
            `labctl review submit --file /tmp/verdict.json`\n   \
            {{\"verdict\": \"approved\" | \"changes_requested\", \"summary\": \"...\", \
            \"findings\": [{{\"path\": \"src/x.rs\", \"line\": 12, \"severity\": \"blocking\" | \
            \"advisory\", \"message\": \"...\"}}]}}\n   \
            A blocking finding is one that must change before a person merges: \
            `changes_requested` names at least one, `approved` none. A verdict lab cannot \
            accept is refused with the reason: fix it and submit once more.\n\
         4. Then end your turn.",
        n = b.issue.number,
        title = b.issue.title.lines().next().unwrap_or(""),
        head = short(b.head),
        base = short(b.base),
        checks = b.checks,
        round = b.round,
        max = b.max,
        plan_too = if b.plan.is_some() {
            " and follows the approved plan"
        } else {
            ""
        },
    );
    if let Some(p) = b.plan {
        text.push_str(&format!(
            "\n\nThe plan approved for this issue (version {}):\n\n{}",
            p.version,
            crate::knob::untrusted("The plan", &p.text)
        ));
    }
    let cut = if b.diff_cut {
        " (cut short: read the rest with git diff)"
    } else {
        ""
    };
    text.push_str(&format!(
        "\n\nThe change{cut}:\n\n{}",
        crate::knob::untrusted("The diff", b.diff)
    ));
    match crate::knob::prompt_block(crate::knob::Phase::Review, knobs) {
        Some(block) => format!("{text}\n\n{block}"),
        None => text,
    }
}

/// The first message of a review run that judges a plan (`plan = auto`):
/// the issue, the plan (fenced as data), the knobs' plan fragments; its
/// checkout is the base, read-only.
pub fn plan_review(
    issue: &Issue,
    plan: &crate::domain::Plan,
    round: i64,
    max: i64,
    knobs: &[crate::knob::Resolved],
) -> String {
    let text = format!(
        "You are a review run of lab, with nobody watching. Judge a plan for issue #{n}: \
         {title}, before anyone writes code. Do not change any file (this checkout is the base \
         branch, read-only).\n\
         \n\
         1. Read the issue: `labctl issue view {n}`, and the code the plan concerns.\n\
         2. Judge whether plan version {version} (below; plan round {round} of at most {max}) \
            resolves the issue, is complete and stays within what the issue asks.\n\
         3. Write your verdict as JSON to a file under /tmp and submit it:\n   \
            `labctl review submit --file /tmp/verdict.json`\n   \
            {{\"verdict\": \"approved\" | \"changes_requested\", \"summary\": \"...\", \
            \"findings\": [{{\"path\": \"src/x.rs\", \"line\": 1, \"severity\": \"blocking\" | \
            \"advisory\", \"message\": \"...\"}}]}}\n   \
            A finding names the file it concerns (line 1 when no line applies). \
            `changes_requested` names at least one blocking finding, `approved` none; the \
            planning run is told your summary and blocking findings.\n\
         4. Then end your turn.\n\
         \n\
         {plan}",
        n = issue.number,
        title = issue.title.lines().next().unwrap_or(""),
        version = plan.version,
        plan = crate::knob::untrusted("The plan", &plan.text),
    );
    match crate::knob::prompt_block(crate::knob::Phase::Plan, knobs) {
        Some(block) => format!("{text}\n\n{block}"),
        None => text,
    }
}

/// What a review run that ended its turn without a verdict is told, once.
pub const REVIEW_MISSING: &str = "lab: your turn ended without a verdict. Submit it with \
     `labctl review submit --file /tmp/verdict.json`, then end your turn.";

/// The round a review's blocking findings start in the implementer's
/// session: the reviewer's words, fenced as data, then what to do.
pub fn review_round(review: &crate::domain::Review, round: i64, max: i64) -> String {
    let short: String = review.head.chars().take(12).collect();
    let mut findings = String::new();
    for f in &review.findings {
        findings.push_str(&format!(
            "- [{}] {}:{}: {}\n",
            f.severity, f.path, f.line, f.message
        ));
    }
    format!(
        "lab: your pull request needs another round (round {round} of {max}). A review of \
         {short} asked for changes.\n\n{}\n\n{}\n\nFix every blocking finding, commit on \
         this branch, and end your turn; lab runs the checks and the review again.",
        crate::knob::untrusted("The review's summary", &review.summary),
        crate::knob::untrusted("The findings", findings.trim_end())
    )
}

/// Why a pull request needs another round.
pub struct Round<'a> {
    /// The head the checks and reviews are about.
    pub head: &'a str,
    /// This round's number, and the most there may be.
    pub round: i64,
    pub max: i64,
    /// What failed, if a check did.
    pub red: Option<Red<'a>>,
    /// People's new reviews and comments: (who, what they wrote).
    pub feedback: Vec<(&'a str, &'a str)>,
    /// What lab does once the agent's turn ends.
    pub then: Then,
}

/// A failed check: the repo's own command (lab ran it), or the forge's.
pub enum Red<'a> {
    Command {
        command: &'a str,
        result: &'a CheckResult,
    },
    Forge(&'a [Failure]),
    /// The branch changes paths outside the run's `writes` (issue 28 §4).
    Scope(&'a super::scope::Breach),
}

/// What lab does after the agent's turn.
#[derive(Clone, Copy)]
pub enum Then {
    /// Runs the repo's check command again.
    Check,
    /// Pushes the branch and reads the forge's checks and reviews again.
    Push,
}

/// The message typed into the run's session for another round: the round,
/// what failed, each piece of new feedback, then what to do.
pub fn round(r: &Round<'_>) -> String {
    let short: String = r.head.chars().take(12).collect();
    let mut out = format!(
        "lab: your pull request needs another round (round {} of {}).",
        r.round, r.max
    );
    match &r.red {
        // On the first line: a CLI that takes one line at a time still
        // learns what failed.
        Some(Red::Command { command, result }) => out.push_str(&format!(
            " Its check failed on {short} ({}). The check command is: {command}\n\n\
             Its output (the end):\n\n{}",
            result.summary(),
            result.output.trim_end()
        )),
        Some(Red::Forge(fails)) => {
            out.push_str(&format!("\n\nIts checks failed on {short}:"));
            for f in *fails {
                out.push_str(&format!("\n- {}: {}", f.name, f.text));
            }
        }
        Some(Red::Scope(b)) => out.push_str(&format!(
            " On {short}, {}. lab pushes none of it and opens no pull request while it does.",
            b.named()
        )),
        None => {}
    }
    for (author, text) in &r.feedback {
        out.push_str(&format!("\n\nReview by {author}:\n{}", text.trim_end()));
    }
    let fix = if matches!(r.red, Some(Red::Scope(_))) {
        "it: undo the changes outside the scope (restore those paths as they are on the base \
         branch, delete the ones you added)"
    } else if r.feedback.is_empty() {
        "the cause"
    } else {
        "what they ask"
    };
    let then = match r.then {
        Then::Check => "runs the check again",
        Then::Push => "pushes it and reads the checks again",
    };
    out.push_str(&format!(
        "\n\nFix {fix}, commit on this branch, and end your turn; lab {then}."
    ));
    out
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
            knobs: Default::default(),
            author: None,
            author_association: None,
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
