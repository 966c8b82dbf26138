//! What this node holds in memory about each of its claims (the follow-up
//! of a claim's pull request): one [`ClaimState`] per claim, made on first
//! use, in one map owned by [`Claims`], forgotten by one call
//! ([`Claims::forget`], from `Scheduler::told`) when the claim's last step on
//! this node is done: its outcome recorded and told to its issue.
//!
//! A claim's follow-up runs tasks of its own (the check command, the forge's
//! push and read); their answers land through [`Claims::land`], which only
//! writes into a state still held: an answer for a claim already forgotten
//! is dropped, never makes the state again. A slot is read and moved on in
//! one hold of the lock ([`Claims::with`]), so an answer landing meanwhile
//! is never overwritten by a slot put back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::follow::Slot;
use super::forge_follow::Follow;
use super::limits::Wait;

/// One claim's state on this node.
#[derive(Debug, Default)]
pub(super) struct ClaimState {
    /// When this node saw the claim's pull request (with no check command,
    /// the run gets a grace period to finish talking before lab ends it).
    pub pr_seen: Option<Instant>,
    /// Its run ended and its issue could not be told: when to try again.
    pub tell_retry: Option<Instant>,
    /// The repo's check command of its pull request.
    pub check: Option<Slot>,
    /// Its pull request on a forge.
    pub forge: Follow,
    /// Its run waits on a usage limit it reported.
    pub limit_wait: Option<Wait>,
    /// Its run gets no answer from the model API (`no_answer.rs`).
    pub no_answer: Option<super::no_answer::NoAnswer>,
    /// The last time its branch changed paths outside its scope (issue 28
    /// §4): what the judge of its outcome says, and how often lab refused
    /// to open its pull request for it.
    pub scope: Option<super::scope::Breach>,
    pub scope_refusals: i64,
    /// A breach found by a round's push, with the head it was found at, not
    /// yet acted on.
    pub scope_pending: Option<(super::scope::Breach, Option<String>)>,
    /// The receipt lab last wrote into its forge pull request's
    /// description: its full text, and the text without usage.
    pub receipt_sent: Option<(String, String)>,
    /// Its planning run was told once that its turn ended without a plan.
    pub plan_nudged: bool,
    /// Its work run was told once that its turn ended without a pull
    /// request.
    pub work_nudged: bool,
    /// Its review run was told once that its turn ended without a verdict.
    pub review_nudged: bool,
    /// How many verdicts its review run submitted that lab refused (one
    /// retry, then the issue needs a person).
    pub review_refused: u32,
    /// When its forge issue was last read for `/lab approve|reject`.
    pub commands_read: Option<Instant>,
    /// Its outcome is recorded: nothing of its following counts any more
    /// (its limit wait is not another run's word on its provider).
    pub judged: bool,
}

/// The states of this node's claims, by claim id.
#[derive(Debug, Default, Clone)]
pub(super) struct Claims(Arc<Mutex<HashMap<i64, ClaimState>>>);

impl Claims {
    /// Runs `f` on the claim's state, made on first use.
    pub fn with<R>(&self, claim: i64, f: impl FnOnce(&mut ClaimState) -> R) -> R {
        f(self.0.lock().expect("poisoned").entry(claim).or_default())
    }

    /// Runs `f` on the claim's state when it is still held: how a follow-up
    /// task's answer lands (`None`: the claim was forgotten, the answer is
    /// dropped).
    pub fn land<R>(&self, claim: i64, f: impl FnOnce(&mut ClaimState) -> R) -> Option<R> {
        self.0.lock().expect("poisoned").get_mut(&claim).map(f)
    }

    /// Reads the claim's state without making it.
    pub fn peek<R>(&self, claim: i64, f: impl FnOnce(&ClaimState) -> R) -> Option<R> {
        self.0.lock().expect("poisoned").get(&claim).map(f)
    }

    /// The claim is done on this node: its state goes, all of it at once.
    pub fn forget(&self, claim: i64) {
        self.0.lock().expect("poisoned").remove(&claim);
    }

    /// The limit waits of the claims not judged yet, but `except`'s.
    pub fn waits(&self, except: i64) -> Vec<Wait> {
        self.0
            .lock()
            .expect("poisoned")
            .iter()
            .filter(|(id, c)| **id != except && !c.judged)
            .filter_map(|(_, c)| c.limit_wait.clone())
            .collect()
    }

    /// The runs with no answer of the claims not judged yet, but
    /// `except`'s.
    pub fn no_answers(&self, except: i64) -> Vec<super::no_answer::NoAnswer> {
        self.0
            .lock()
            .expect("poisoned")
            .iter()
            .filter(|(id, c)| **id != except && !c.judged)
            .filter_map(|(_, c)| c.no_answer.clone())
            .collect()
    }

    /// How many claims this node holds a state for.
    pub fn len(&self) -> usize {
        self.0.lock().expect("poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_for_a_forgotten_claim_is_dropped() {
        let claims = Claims::default();
        claims.with(7, |c| c.pr_seen = Some(Instant::now()));
        assert_eq!(claims.len(), 1);
        assert_eq!(claims.land(7, |c| c.pr_seen.is_some()), Some(true));
        claims.forget(7);
        assert_eq!(claims.land(7, |c| c.judged = true), None);
        assert_eq!(claims.peek(7, |_| ()), None);
        assert_eq!(claims.len(), 0, "a late answer made no state");
    }
}
