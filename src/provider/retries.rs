//! What the agent CLIs show while the model API does not answer and they
//! try again (issue 40 §3). Pure: a screen in, the error it retries on out.
//!
//! No hook reports a retry; the screen is the only word of it, so it is
//! read last, after the hooks (ADR 13). As the pinned CLIs draw it:
//! - Claude Code 2.1.332 (seen against a stand-in Messages API answering
//!   529 and 401): its spinner line says
//!   `✻ 529 Overloaded · retrying in 6s · attempt 6/10` (or
//!   `✻ 401 invalid x-api-key · retrying in 18s · attempt 6/10`), ten
//!   attempts over about three minutes, then its `StopFailure` hook
//!   (`error`: `server_error`, `authentication_failed`, …) and
//!   `API Error: 529 Overloaded. …` in the transcript.
//! - Codex 0.171.0 (`strings` on the binary): a status line
//!   `• Reconnecting... 1/5` or `◦ Server is busy, reconnecting 2/5`.
//!
//! Run side: the screen is the agent's to draw, so what it says here moves
//! that run's own state only; the AFK loop holds a provider back only on
//! two runs' word (`afk/no_answer.rs`).

/// The error a screen says its CLI retries on, in lab's words
/// (`retrying: 529 Overloaded`); `None` when it retries nothing.
///
/// Only a status line counts: one that starts with the CLI's spinner or
/// bullet glyph (not a letter, digit or ASCII punctuation), so a file the
/// agent prints that quotes such a line is less likely to be taken for one.
pub fn retrying(screen: &str) -> Option<String> {
    screen.lines().rev().find_map(|line| {
        let line = line.trim();
        let glyph = line.chars().next()?;
        if glyph.is_alphanumeric() || glyph.is_ascii() {
            return None;
        }
        let text = line[glyph.len_utf8()..].trim_start();
        claude(text).or_else(|| codex(text))
    })
}

/// `529 Overloaded · retrying in 6s · attempt 6/10`.
fn claude(text: &str) -> Option<String> {
    let (error, rest) = text.split_once(" · retrying in ")?;
    let (_, attempt) = rest.split_once(" · attempt ")?;
    fraction(attempt)?;
    Some(in_words(error))
}

/// `Reconnecting... 1/5`, `Server is busy, reconnecting 2/5`.
fn codex(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let at = lower.rfind("reconnecting")?;
    let tail = lower[at + "reconnecting".len()..].trim_start_matches('.');
    fraction(tail.trim())?;
    let error = text[..at].trim().trim_end_matches(',');
    Some(in_words(if error.is_empty() {
        "reconnecting to the model API"
    } else {
        error
    }))
}

/// `6/10` (and nothing after it but spaces or a closing bracket).
fn fraction(s: &str) -> Option<(u32, u32)> {
    let s = s.trim().trim_end_matches([')', ']']);
    let (k, n) = s.split_once('/')?;
    let (k, n): (u32, u32) = (k.trim().parse().ok()?, n.trim().parse().ok()?);
    (k >= 1 && n >= 1).then_some((k, n))
}

fn in_words(error: &str) -> String {
    let error = error.trim();
    if error.is_empty() {
        "retrying".to_owned()
    } else {
        format!("retrying: {error}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_s_retry_line_names_its_error() {
        let screen = "❯ Say hi.\n\
                      ✻ 529 Overloaded · retrying in 6s · attempt 6/10\n  \
                      ⎿  If it persists, check your inference gateway (127.0.0.1:38111).\n\
                      ────────\n❯\n";
        assert_eq!(
            retrying(screen).as_deref(),
            Some("retrying: 529 Overloaded")
        );
        let auth = "✶ 401 invalid x-api-key · retrying in 18s · attempt 6/10";
        assert_eq!(
            retrying(auth).as_deref(),
            Some("retrying: 401 invalid x-api-key")
        );
    }

    #[test]
    fn codex_s_reconnecting_line_is_a_retry() {
        assert_eq!(
            retrying("• Reconnecting... 1/5").as_deref(),
            Some("retrying: reconnecting to the model API")
        );
        assert_eq!(
            retrying("◦ Server is busy, reconnecting 2/5").as_deref(),
            Some("retrying: Server is busy")
        );
    }

    #[test]
    fn prose_and_given_up_turns_are_no_retry() {
        for screen in [
            "",
            "✻ Thinking… (esc to interrupt)",
            // Quoted in a file the agent prints: no glyph leads the line.
            "> ✻ 529 Overloaded · retrying in 6s · attempt 6/10",
            "529 Overloaded · retrying in 6s · attempt 6/10",
            "● API Error: 529 Overloaded. This is a server-side issue, usually temporary",
            "❯ Resend your message to try again",
            "• Reconnecting to the database later",
            "✻ x · retrying in 5s · attempt many",
        ] {
            assert_eq!(retrying(screen), None, "{screen:?}");
        }
    }
}
