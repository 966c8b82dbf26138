//! What the agent CLIs print when a provider's usage limit stops them, and
//! when it resets (issue 14). Pure: text in, a line and a reset out.
//!
//! The messages, as the pinned CLIs build them (`strings` on the binaries):
//! - Claude Code 2.1.332: `You've hit your ${limit}${resets}` (the limit is
//!   "5-hour limit", "weekly limit", "Opus limit", "usage credit limit", …;
//!   `resets` is ` · resets 3pm (Europe/Berlin)` within a day, else with a
//!   date: ` · resets Oct 7, 3pm (Europe/Berlin)`, and the year when it is
//!   another: `Jan 6, 2028, 2pm`), `You're out of usage credits…`, `Credit
//!   balance is too low`, and `Usage limit reached · …`.
//! - Codex 0.171.0: `You’ve hit your usage limit. … Try again at {time}.`
//!   (a curly apostrophe; `{time}` is `3:00 PM` today, else
//!   `Oct 7th, 2026 3:00 PM`), `Your workspace is out of credits…`,
//!   `You're out of credits.` and `Usage limit reached. You've reached your
//!   usage limit.`

/// What the screen check says of a run whose screen shows a usage limit.
pub const REACHED: &str = "usage limit reached";

/// When a usage limit resets, as its message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    /// In this many seconds.
    In(i64),
    /// At this local time of day (the next one to come).
    At { hour: u32, minute: u32 },
    /// At this local date and time (its year when the message says it,
    /// else the next such date).
    On {
        year: Option<i64>,
        month: u32,
        day: u32,
        hour: u32,
        minute: u32,
    },
    /// The message does not say.
    Unknown,
}

/// How long lab waits when a message gives no reset time (then it tries
/// again, and a limit still in force shows again).
pub const UNKNOWN_RESET_SECS: i64 = 15 * 60;

/// The line of `screen` that reports a usage limit, and its reset.
pub fn usage_limit(screen: &str) -> Option<(String, Reset)> {
    let line = screen.lines().map(str::trim).find(|l| {
        let l = l.to_lowercase().replace('\u{2019}', "'");
        l.contains("usage limit")
            || l.contains("limit reached")
            || (l.contains("you've hit your") && l.contains("limit"))
            || l.contains("out of usage credits")
            || l.contains("out of credits")
            || l.contains("credit balance is too low")
            || l.contains("credit balance too low")
            || l.contains("spend cap")
    })?;
    Some((line.to_owned(), reset(line)))
}

/// The reset a limit's line names.
pub fn reset(line: &str) -> Reset {
    let l = line.to_lowercase();
    for lead in ["resets in ", "try again in ", "reset in "] {
        if let Some(at) = l.find(lead)
            && let Some(secs) = duration(&l[at + lead.len()..])
        {
            return Reset::In(secs);
        }
    }
    for lead in ["resets at ", "try again at ", "resets "] {
        if let Some(at) = l.find(lead) {
            let rest = &l[at + lead.len()..];
            if let Some(r) = dated(rest) {
                return r;
            }
            if let Some((hour, minute)) = clock(rest) {
                return Reset::At { hour, minute };
            }
        }
    }
    Reset::Unknown
}

/// `oct 7, 3pm`, `jan 6, 2028, 2pm`, `oct 7th, 2026 3:00 pm`: a date with
/// its time (lower case).
fn dated(s: &str) -> Option<Reset> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let s = s.trim_start();
    let month = MONTHS.iter().position(|m| s.starts_with(m))? as u32 + 1;
    let rest = s
        .get(3..)?
        .trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '.');
    let rest = rest.trim_start();
    let day_digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let day: u32 = day_digits.parse().ok().filter(|d| (1..=31).contains(d))?;
    let mut rest = rest[day_digits.len()..]
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .trim_start_matches(',')
        .trim_start();
    let mut year = None;
    let year_digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if year_digits.len() == 4 && !rest[4..].starts_with(':') {
        year = year_digits.parse().ok();
        rest = rest[4..].trim_start_matches(',').trim_start();
    }
    let rest = rest.strip_prefix("at ").unwrap_or(rest);
    let (hour, minute) = clock(rest)?;
    Some(Reset::On {
        year,
        month,
        day,
        hour,
        minute,
    })
}

/// `2 hours 3 minutes`, `2h 30m`, `45 seconds`: seconds.
fn duration(s: &str) -> Option<i64> {
    let mut total = 0i64;
    let mut seen = false;
    let mut rest = s.trim_start();
    loop {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            break;
        }
        let n: i64 = digits.parse().ok()?;
        rest = rest[digits.len()..].trim_start();
        let unit: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        let secs = match unit.as_str() {
            "s" | "sec" | "secs" | "second" | "seconds" => 1,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => 86_400,
            _ => break,
        };
        total = total.saturating_add(n.saturating_mul(secs));
        seen = true;
        rest = rest[unit.len()..].trim_start_matches([' ', ',']);
        rest = rest.strip_prefix("and ").unwrap_or(rest);
    }
    seen.then_some(total)
}

/// `3pm`, `3:45pm`, `3:45 pm`, `15:45`: the hour (0–23) and minute.
fn clock(s: &str) -> Option<(u32, u32)> {
    let s = s.trim_start();
    let hour_digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    if hour_digits.is_empty() || hour_digits.len() > 2 {
        return None;
    }
    let mut hour: u32 = hour_digits.parse().ok()?;
    let mut rest = &s[hour_digits.len()..];
    let mut minute = 0;
    if let Some(r) = rest.strip_prefix(':') {
        let m: String = r.chars().take_while(char::is_ascii_digit).collect();
        if m.len() != 2 {
            return None;
        }
        minute = m.parse().ok()?;
        rest = &r[2..];
    }
    let rest = rest.trim_start();
    let (pm, am) = (rest.starts_with("pm"), rest.starts_with("am"));
    if pm || am {
        if !(1..=12).contains(&hour) {
            return None;
        }
        hour = match (hour, pm) {
            (12, false) => 0,
            (12, true) => 12,
            (h, true) => h + 12,
            (h, false) => h,
        };
    } else if !s.contains(':') {
        // A bare number is no time of day ("resets 5 days").
        return None;
    }
    (hour < 24 && minute < 60).then_some((hour, minute))
}

/// The longest lab waits on one message: a weekly limit's reset is at
/// most a week away. A provider is held back only on two runs' word (a
/// single run's screen is its agent's to forge, `afk/limits.rs`), and a
/// waiting run's own time limit keeps counting.
pub const MAX_HOLD_SECS: i64 = 8 * 86_400;

/// When the limit lifts, in ms since the epoch: `now_ms` is the time,
/// `utc_offset_secs` the machine's local offset (a time of day in a
/// message is the CLI's local time); at most [`MAX_HOLD_SECS`] away.
pub fn until_ms(reset: Reset, now_ms: i64, utc_offset_secs: i64) -> i64 {
    reset_at(reset, now_ms, utc_offset_secs).min(now_ms + MAX_HOLD_SECS * 1000)
}

fn reset_at(reset: Reset, now_ms: i64, utc_offset_secs: i64) -> i64 {
    match reset {
        Reset::In(secs) => now_ms.saturating_add(secs.saturating_mul(1000)),
        Reset::Unknown => now_ms + UNKNOWN_RESET_SECS * 1000,
        Reset::At { hour, minute } => {
            let day = 86_400_000;
            let local_now = now_ms + utc_offset_secs * 1000;
            let midnight = local_now - local_now.rem_euclid(day);
            let mut at = midnight + (i64::from(hour) * 3600 + i64::from(minute) * 60) * 1000;
            if at <= local_now {
                at += day;
            }
            at - utc_offset_secs * 1000
        }
        Reset::On {
            year,
            month,
            day,
            hour,
            minute,
        } => {
            let local_now = now_ms + utc_offset_secs * 1000;
            let (this_year, _, _) = crate::clock::civil_date(local_now);
            let at = |y: i64| crate::clock::civil_ms(y, month, day, hour, minute);
            let local = match year {
                Some(y) => at(y),
                None => at(this_year)
                    .filter(|t| *t > local_now)
                    .or_else(|| at(this_year + 1)),
            };
            // A date already past (or none such) says no more than "unknown".
            match local {
                Some(local) if local > local_now => local - utc_offset_secs * 1000,
                _ => now_ms + UNKNOWN_RESET_SECS * 1000,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_clis_messages_are_found_with_their_reset() {
        let cases = [
            (
                "  ⎿  You've hit your session limit · resets 3pm (Europe/Berlin)",
                Reset::At {
                    hour: 15,
                    minute: 0,
                },
            ),
            (
                "You've hit your weekly limit · resets at 3:45am",
                Reset::At {
                    hour: 3,
                    minute: 45,
                },
            ),
            (
                "You've hit your session limit · resets in 2h 30m",
                Reset::In(9000),
            ),
            (
                "■ You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 11:05 PM.",
                Reset::At {
                    hour: 23,
                    minute: 5,
                },
            ),
            ("Usage limit reached · try again in 3 seconds", Reset::In(3)),
            (
                "You've hit your weekly limit · resets Oct 7, 3pm (Europe/Paris)",
                Reset::On {
                    year: None,
                    month: 10,
                    day: 7,
                    hour: 15,
                    minute: 0,
                },
            ),
            (
                "You've hit your weekly limit · progress saved · resets Jan 6, 2028, 2:30pm (Europe/Paris)",
                Reset::On {
                    year: Some(2028),
                    month: 1,
                    day: 6,
                    hour: 14,
                    minute: 30,
                },
            ),
            (
                "■ You\u{2019}ve hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase more credits or try again at Oct 7th, 2026 3:00 PM.",
                Reset::On {
                    year: Some(2026),
                    month: 10,
                    day: 7,
                    hour: 15,
                    minute: 0,
                },
            ),
            (
                "You're out of usage credits · resets Dec 5, 2pm (Europe/Paris)",
                Reset::On {
                    year: None,
                    month: 12,
                    day: 5,
                    hour: 14,
                    minute: 0,
                },
            ),
            (
                "Your workspace is out of credits. Add credits to continue.",
                Reset::Unknown,
            ),
            (
                "Credit balance too low · Add funds: https://platform.claude.com/settings/billing",
                Reset::Unknown,
            ),
            (
                "Usage limit reached. You've reached your usage limit.",
                Reset::Unknown,
            ),
        ];
        for (line, want) in cases {
            let screen = format!("some output\n{line}\n> ");
            let (found, reset) =
                usage_limit(&screen).unwrap_or_else(|| panic!("not found: {line}"));
            assert_eq!((found.as_str(), reset), (line.trim(), want), "{line}");
        }
        assert_eq!(usage_limit("all good\nno limits here"), None);
        assert_eq!(reset("resets 5 days from now"), Reset::Unknown);
        assert_eq!(reset("resets at 25:00"), Reset::Unknown);
    }

    #[test]
    fn a_time_of_day_is_the_next_one() {
        let h = 3_600_000;
        // 10:00 UTC; a reset at 15:00 local in UTC+2 is 13:00 UTC today.
        let now = 20_000 * 24 * h + 10 * h;
        assert_eq!(
            until_ms(
                Reset::At {
                    hour: 15,
                    minute: 0
                },
                now,
                7200
            ),
            now + 3 * h
        );
        // 09:00 local has passed: tomorrow's.
        assert_eq!(
            until_ms(Reset::At { hour: 9, minute: 0 }, now, 0),
            now + 23 * h
        );
        assert_eq!(until_ms(Reset::In(5), now, 0), now + 5000);
        // A date: that day and time, local.
        let on = |year, month, day, hour| Reset::On {
            year,
            month,
            day,
            hour,
            minute: 0,
        };
        // 20_000 days after the epoch is 2024-10-04; 10:00 UTC.
        assert_eq!(
            reset_at(on(Some(2024), 10, 7, 15), now, 0),
            now + (3 * 24 + 5) * h
        );
        assert_eq!(
            reset_at(on(None, 10, 7, 15), now, 7200),
            now + (3 * 24 + 3) * h
        );
        // Without a year, a date gone by this year is next year's.
        assert_eq!(
            reset_at(on(None, 10, 3, 15), now, 0),
            now + (364 * 24 + 5) * h
        );
        assert_eq!(
            reset_at(on(Some(2020), 1, 1, 0), now, 0),
            now + UNKNOWN_RESET_SECS * 1000
        );
        // A forged "resets in 30 days" holds at most the longest hold.
        assert_eq!(
            until_ms(Reset::In(30 * 86_400), now, 0),
            now + MAX_HOLD_SECS * 1000
        );
        assert_eq!(
            until_ms(Reset::In(i64::MAX), now, 0),
            now + MAX_HOLD_SECS * 1000
        );
        assert_eq!(
            until_ms(Reset::Unknown, now, 0),
            now + UNKNOWN_RESET_SECS * 1000
        );
    }
}
