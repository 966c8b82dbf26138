//! Calendar dates and times of day in UTC, for the few places lab reads a
//! date from text (a usage limit's reset) or names a folder by one (Codex's
//! rollouts). A leaf: it names no other module.

/// The UTC date (year, month, day) of a time in ms since the epoch (times
/// before it count as the epoch).
pub fn civil_date(ms: i64) -> (i64, u32, u32) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    let date = humantime::format_rfc3339(t).to_string();
    let part = |r: std::ops::Range<usize>| date.get(r).and_then(|p| p.parse().ok());
    (
        part(0..4).unwrap_or(1970),
        part(5..7).unwrap_or(1) as u32,
        part(8..10).unwrap_or(1) as u32,
    )
}

/// A UTC date and time of day as ms since the epoch; `None` for a date that
/// does not exist (Feb 30) or comes before the epoch.
pub fn civil_ms(year: i64, month: u32, day: u32, hour: u32, minute: u32) -> Option<i64> {
    let t = humantime::parse_rfc3339(&format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:00Z"
    ))
    .ok()?;
    i64::try_from(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_round_trip() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(1_764_583_200_000), (2025, 12, 1));
        assert_eq!(civil_date(951_782_400_000), (2000, 2, 29));
        assert_eq!(civil_date(-1), (1970, 1, 1));
        assert_eq!(civil_ms(2000, 2, 29, 0, 0), Some(951_782_400_000));
        assert_eq!(civil_ms(1970, 1, 1, 1, 1), Some(3_660_000));
        assert_eq!(civil_ms(2026, 2, 30, 0, 0), None);
        assert_eq!(civil_ms(2026, 1, 1, 24, 0), None);
    }
}
