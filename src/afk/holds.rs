//! Limits and admission: what holds this node's AFK launches back, and
//! why. A provider held by a usage limit two runs reported
//! (`limits::Limits`) or by a CLI its own check says cannot work
//! (`cli_hold::CliHolds`); the machine's memory (`admission.rs`) as the
//! last tick found it.

use std::sync::Mutex;

use super::cli_hold::CliHolds;
use super::limits::Limits;

#[derive(Debug, Default)]
pub struct Holds {
    limits: Limits,
    cli: CliHolds,
    /// Why the last tick started nothing for want of memory, if it did.
    admission: Mutex<Option<String>>,
}

impl Holds {
    /// Providers held back on two runs' word.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Providers whose CLI cannot work, as its own check says.
    pub fn cli(&self) -> &CliHolds {
        &self.cli
    }

    /// Why the last tick started nothing for want of memory, if it did.
    pub fn admission(&self) -> Option<String> {
        self.admission.lock().expect("poisoned").clone()
    }

    /// What the tick's admission check found.
    pub fn admitted(&self, why: Option<String>) {
        *self.admission.lock().expect("poisoned") = why;
    }

    /// Why no new AFK run of `provider` starts now, in the words a repo's
    /// note gives (`None`: nothing holds it).
    pub fn holding(&self, provider: &str) -> Option<String> {
        if let Some(h) = self.cli.holds(provider) {
            return Some(format!(
                "{} cannot work here ({}): no new AFK run; {}",
                h.provider, h.reason, h.fix
            ));
        }
        self.limits.holds(provider).map(|l| {
            format!(
                "{} is at its usage limit until {}: no new AFK run",
                l.provider,
                crate::domain::rfc3339(l.until_ms)
            )
        })
    }
}
