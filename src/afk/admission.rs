//! Memory admission (issue 14): an AFK launch waits while the machine has
//! less memory available than a run is expected to need
//! (`afk.memory_per_run_mb`), so a burst of ready issues cannot run the host
//! out of memory. Each launch of a tick counts against what the tick saw:
//! an agent's memory is not in use the moment it starts.

/// MiB the kernel says are available for new work (`MemAvailable` of
/// `/proc/meminfo`); `None` where it cannot be read.
pub fn available_mb() -> Option<i64> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse_meminfo(text: &str) -> Option<i64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// How many runs may start now, and when none may, why.
pub fn admit(per_run_mb: i64, available_mb: Option<i64>) -> (usize, Option<String>) {
    if per_run_mb <= 0 {
        return (usize::MAX, None);
    }
    let Some(avail) = available_mb else {
        // A machine that does not say: no admission check, as before.
        return (usize::MAX, None);
    };
    let n = (avail / per_run_mb).max(0) as usize;
    let why = (n == 0).then(|| {
        format!(
            "waiting for memory: {avail} MiB available, an AFK run needs {per_run_mb} MiB (afk.memory_per_run_mb)"
        )
    });
    (n, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let t = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   2097152 kB\n";
        assert_eq!(parse_meminfo(t), Some(2048));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
        assert!(available_mb().is_some_and(|m| m > 0));
    }

    #[test]
    fn runs_are_admitted_while_memory_lasts() {
        assert_eq!(admit(0, Some(1)), (usize::MAX, None));
        assert_eq!(admit(1024, None), (usize::MAX, None));
        assert_eq!(admit(1024, Some(3000)), (2, None));
        let (n, why) = admit(1024, Some(1000));
        assert_eq!(n, 0);
        assert_eq!(
            why.unwrap(),
            "waiting for memory: 1000 MiB available, an AFK run needs 1024 MiB (afk.memory_per_run_mb)"
        );
    }
}
