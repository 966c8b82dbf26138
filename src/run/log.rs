//! A run's log: every byte its pane printed, appended by the relay or the
//! run's shim. Readers take it from an offset. Past `runs.log_max_mb`, lab
//! drops the oldest output by punching a hole over it ([`keep_newest`]):
//! offsets stay valid (the file's length keeps counting every byte), the
//! disk keeps only the newest part, and readers skip the hole.
//!
//! Host side, over bytes the agent printed: they are only copied and
//! measured here, never interpreted.

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsFd;

/// The first offset at or after `offset` that holds output (the end when
/// only a hole follows).
fn data_from(f: &std::fs::File, offset: u64, len: u64) -> u64 {
    match rustix::fs::seek(f.as_fd(), rustix::fs::SeekFrom::Data(offset)) {
        Ok(at) => at.min(len),
        Err(_) => offset.min(len),
    }
}

/// How many bytes of a log's oldest output were dropped (0 for a log kept
/// whole, or none).
pub fn dropped(path: &str) -> u64 {
    let Ok(f) = std::fs::File::open(path) else {
        return 0;
    };
    let len = f.metadata().map_or(0, |m| m.len());
    if len == 0 {
        return 0;
    }
    data_from(&f, 0, len)
}

/// Reads a log from `offset` (from where output is kept, if that is
/// later): the bytes and the offset after them.
pub fn read(path: &str, offset: u64, max: u64) -> std::io::Result<(Vec<u8>, u64)> {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = data_from(&f, offset.min(len), len);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(max).read_to_end(&mut buf)?;
    let next = start + buf.len() as u64;
    Ok((buf, next))
}

/// Where a reader that is at `offset` of a log goes on from: past a hole
/// of dropped output.
pub fn resume_at(f: &std::fs::File, offset: u64, len: u64) -> u64 {
    data_from(f, offset.min(len), len)
}

/// Keeps at most `cap` bytes of a log on disk: when more is kept, the
/// oldest part is dropped down to three quarters of the cap (a hole punched
/// over it, whole pages only). Returns how many bytes are dropped in all.
pub fn keep_newest(path: &str, cap: u64) -> std::io::Result<u64> {
    use rustix::fs::FallocateFlags;
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    let len = f.metadata()?.len();
    let kept_from = data_from(&f, 0, len);
    if len.saturating_sub(kept_from) <= cap {
        return Ok(kept_from);
    }
    let until = (len - cap / 4 * 3) / 4096 * 4096;
    if until <= kept_from {
        return Ok(kept_from);
    }
    rustix::fs::fallocate(
        f.as_fd(),
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        0,
        until,
    )?;
    Ok(data_from(&f, 0, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_output_goes_and_offsets_stay() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("output.log");
        let ps = p.to_string_lossy().into_owned();
        let chunk: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
        for _ in 0..8 {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&p)
                .and_then(|mut f| std::io::Write::write_all(&mut f, &chunk))
                .unwrap();
        }
        assert_eq!(dropped(&ps), 0);
        let dropped_now = keep_newest(&ps, 128 * 1024).unwrap();
        let len = std::fs::metadata(&p).unwrap().len();
        assert_eq!(len, 8 * 64 * 1024, "the length counts every byte");
        if dropped_now == 0 {
            // A filesystem without holes keeps it all.
            return;
        }
        assert!(len - dropped_now <= 128 * 1024, "{dropped_now}");
        assert_eq!(dropped(&ps), dropped_now);
        // A reader from the start goes on where output is kept, at the
        // offset the bytes always had.
        let (bytes, next) = read(&ps, 0, 16).unwrap();
        assert_eq!(next, dropped_now + 16);
        let at = (dropped_now as usize % (64 * 1024)) % 26;
        assert_eq!(bytes[0], b'a' + at as u8);
        // Under the cap, nothing more goes.
        assert_eq!(keep_newest(&ps, 1 << 30).unwrap(), dropped_now);
    }
}
