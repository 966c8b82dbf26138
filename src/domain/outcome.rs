//! How an AFK run ended for its issue, and the label that says so on the
//! issue.

use super::spelled::spelled;

spelled! {
    /// How an AFK run ended for its issue (a claim's outcome).
    pub enum Outcome ("outcome") {
        /// It opened a pull request.
        Succeeded = "succeeded",
        /// It ended without one; its exit status and last lines say why.
        Failed = "failed",
        /// It ran past the run time limit and lab stopped it.
        TimedOut = "timed_out",
    }
}

impl Outcome {
    /// The label its issue gets instead of the ready label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Succeeded => "lab:pr-opened",
            Outcome::Failed => "lab:failed",
            Outcome::TimedOut => "lab:timed-out",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_has_its_label() {
        let labels: Vec<&str> = Outcome::ALL.iter().map(|o| o.label()).collect();
        assert_eq!(labels, ["lab:pr-opened", "lab:failed", "lab:timed-out"]);
    }
}
