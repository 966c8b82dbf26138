//! A run's log: every byte its pane printed, appended by the run's shim (or
//! by tmux's `pipe-pane`), both with `O_APPEND`. Readers take it from an
//! offset that counts every byte the run ever printed. Past
//! `runs.log_max_mb`, lab drops the oldest output ([`keep_newest`]) and the
//! file stays that size on disk *and* in its length, which copies and
//! backups see:
//!
//! - where the filesystem can (ext4, XFS), the oldest blocks are cut out of
//!   the file (`FALLOC_FL_COLLAPSE_RANGE`) and how many bytes were cut is kept
//!   on the file itself, in the extended attribute [`BASE_XATTR`]: an offset
//!   is that many bytes more than its place in the file;
//! - elsewhere (tmpfs, btrfs) a hole is punched over them: the disk keeps only
//!   the newest part, the length still counts every byte, and readers skip the
//!   hole.
//!
//! Cutting and reading the attribute are done under the file's lock
//! (`flock`: exclusive to cut, shared to read), so a reader never pairs a cut
//! file with the attribute from before the cut. A cut waits for the readers
//! of the moment (off the async threads); a reader waits for a cut, which is
//! one system call.
//!
//! Host side, over bytes the agent printed: they are only copied and
//! measured here, never interpreted. The agent never holds the log (the shim
//! that writes it lives outside the sandbox, and its descriptor is not
//! inherited), so the attribute is lab's word alone.

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsFd;

use rustix::fs::{FlockOperation, XattrFlags};

/// The extended attribute holding how many bytes were cut from a log's
/// front (decimal).
pub const BASE_XATTR: &str = "user.lab.base";

/// An open log, read under its shared lock (held until it is dropped).
pub struct Log {
    f: std::fs::File,
    /// Bytes cut from the front: the offset of the file's first byte.
    base: u64,
    /// The file's own length.
    file_len: u64,
}

impl Log {
    /// Opens the log at `path` to read it; `None` when there is none yet.
    pub fn open(path: &str) -> std::io::Result<Option<Log>> {
        let f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        // Released when the file is closed.
        let _ = rustix::fs::flock(f.as_fd(), FlockOperation::LockShared);
        let base = base_of(&f);
        let file_len = f.metadata()?.len();
        Ok(Some(Log { f, base, file_len }))
    }

    /// The offset after the last byte printed: every byte ever printed.
    pub fn len(&self) -> u64 {
        self.base.saturating_add(self.file_len)
    }

    /// Whether nothing was printed yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first offset at or after `offset` that still holds output (the
    /// end when none does).
    pub fn kept_from(&self, offset: u64) -> u64 {
        let at = offset.max(self.base).min(self.len()) - self.base;
        let data = match rustix::fs::seek(self.f.as_fd(), rustix::fs::SeekFrom::Data(at)) {
            Ok(d) => d.min(self.file_len),
            Err(_) => at,
        };
        self.base.saturating_add(data)
    }

    /// How many of the oldest bytes were dropped.
    pub fn dropped(&self) -> u64 {
        if self.is_empty() {
            return 0;
        }
        self.kept_from(0)
    }

    /// Reads from `offset` (from where output is kept, if that is later) to
    /// the end: the reader and the offset it starts at.
    pub fn read_from(&mut self, offset: u64) -> std::io::Result<(impl Read + '_, u64)> {
        let start = self.kept_from(offset);
        self.f.seek(SeekFrom::Start(start - self.base))?;
        let left = self.file_len - (start - self.base);
        Ok((Read::by_ref(&mut self.f).take(left), start))
    }
}

/// The base recorded on a log's file (0 for one never cut, or a value lab
/// did not write).
fn base_of(f: &std::fs::File) -> u64 {
    let mut buf = [0u8; 24];
    match rustix::fs::fgetxattr(f.as_fd(), BASE_XATTR, &mut buf) {
        Ok(n) => std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        Err(_) => 0,
    }
}

/// Every byte a log's run has printed (0 for none).
pub fn size(path: &str) -> u64 {
    Log::open(path).ok().flatten().map_or(0, |l| l.len())
}

/// How many bytes of a log's oldest output were dropped (0 for a log kept
/// whole, or none).
pub fn dropped(path: &str) -> u64 {
    Log::open(path).ok().flatten().map_or(0, |l| l.dropped())
}

/// Reads up to `max` bytes of a log from `offset` (from where output is
/// kept, if that is later): the bytes and the offset after them.
pub fn read(path: &str, offset: u64, max: u64) -> std::io::Result<(Vec<u8>, u64)> {
    let Some(mut log) = Log::open(path)? else {
        return Ok((Vec::new(), 0));
    };
    let (r, start) = log.read_from(offset)?;
    let mut buf = Vec::new();
    r.take(max).read_to_end(&mut buf)?;
    let next = start + buf.len() as u64;
    Ok((buf, next))
}

/// Keeps at most `cap` bytes of a log on disk and in its length: when more
/// is kept, the oldest part is dropped down to about three quarters of the
/// cap (whole blocks only). Returns how many bytes are dropped in all.
/// Blocking: it waits for the log's readers to finish.
pub fn keep_newest(path: &str, cap: u64) -> std::io::Result<u64> {
    use rustix::fs::FallocateFlags;
    use std::os::unix::fs::MetadataExt;
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    rustix::fs::flock(f.as_fd(), FlockOperation::LockExclusive)?;
    let meta = f.metadata()?;
    let (file_len, block) = (meta.len(), meta.blksize().max(4096));
    let base = base_of(&f);
    let log = Log {
        f: f.try_clone()?,
        base,
        file_len,
    };
    let kept_from = log.kept_from(0) - base;
    if file_len.saturating_sub(kept_from) <= cap {
        return Ok(base.saturating_add(kept_from));
    }
    let until = (file_len - cap / 4 * 3) / block * block;
    if until == 0 || until >= file_len {
        return Ok(base.saturating_add(kept_from));
    }
    // The cut and the attribute go together: the attribute is written
    // first as the bytes before the cut would make it (so a filesystem
    // without attributes is never cut), then the cut.
    let cut = base.saturating_add(until);
    if rustix::fs::fsetxattr(
        f.as_fd(),
        BASE_XATTR,
        cut.to_string().as_bytes(),
        XattrFlags::empty(),
    )
    .is_ok()
    {
        match rustix::fs::fallocate(f.as_fd(), FallocateFlags::COLLAPSE_RANGE, 0, until) {
            Ok(()) => return Ok(cut),
            Err(_) => {
                // Not on this filesystem: put the attribute back.
                let _ = rustix::fs::fsetxattr(
                    f.as_fd(),
                    BASE_XATTR,
                    base.to_string().as_bytes(),
                    XattrFlags::empty(),
                );
            }
        }
    }
    rustix::fs::fallocate(
        f.as_fd(),
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        0,
        until,
    )?;
    Ok(log.kept_from(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(p: &std::path::Path, bytes: &[u8]) {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(p)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
            .unwrap();
    }

    fn alphabet(n: usize) -> Vec<u8> {
        (0..n).map(|i| b'a' + (i % 26) as u8).collect()
    }

    /// Checks a log of `total` bytes, cut under `cap`, in the folder `dir`:
    /// offsets keep their bytes, and what is kept is at most the cap.
    fn the_oldest_output_goes_in(dir: &std::path::Path) -> (u64, u64) {
        let p = dir.join("output.log");
        let ps = p.to_string_lossy().into_owned();
        let chunk = alphabet(64 * 1024);
        for _ in 0..8 {
            append(&p, &chunk);
        }
        let total = 8 * 64 * 1024;
        assert_eq!(dropped(&ps), 0);
        assert_eq!(size(&ps), total);
        let dropped_now = keep_newest(&ps, 128 * 1024).unwrap();
        assert_eq!(size(&ps), total, "the size counts every byte printed");
        if dropped_now == 0 {
            // A filesystem that can neither cut nor punch keeps it all.
            return (0, std::fs::metadata(&p).unwrap().len());
        }
        assert!(total - dropped_now <= 128 * 1024, "{dropped_now}");
        assert_eq!(dropped(&ps), dropped_now);
        // A reader from the start goes on where output is kept, at the
        // offset the bytes always had.
        let (bytes, next) = read(&ps, 0, 16).unwrap();
        assert_eq!(next, dropped_now + 16);
        let at = (dropped_now as usize % (64 * 1024)) % 26;
        assert_eq!(bytes[0], b'a' + at as u8);
        // Any offset still kept reads the byte it always had.
        let (bytes, next) = read(&ps, total - 5, 16).unwrap();
        assert_eq!((bytes.len(), next), (5, total));
        assert_eq!(bytes[0], chunk[(total as usize - 5) % chunk.len()]);
        // Under the cap, nothing more goes.
        assert_eq!(keep_newest(&ps, 1 << 30).unwrap(), dropped_now);
        // Output printed after the cut lands at the end, and is read there.
        append(&p, b"NEW");
        let (bytes, next) = read(&ps, total, 16).unwrap();
        assert_eq!((bytes.as_slice(), next), (&b"NEW"[..], total + 3));
        (dropped_now, std::fs::metadata(&p).unwrap().len())
    }

    #[test]
    fn the_oldest_output_goes_and_offsets_stay() {
        let dir = tempfile::tempdir().unwrap();
        let (dropped, file_len) = the_oldest_output_goes_in(dir.path());
        let cut = base_of(&std::fs::File::open(dir.path().join("output.log")).unwrap());
        if cut > 0 {
            // Cut out: the file's own length is what is kept.
            assert_eq!(cut, dropped);
            assert!(file_len <= 128 * 1024 + 3, "{file_len}");
        }
    }

    /// On this machine's filesystem (ext4) the file's length stays under the
    /// cap: 6.3 MB under a 1 MiB cap was the bug.
    #[test]
    fn the_log_s_length_stays_under_its_cap_where_it_can_be_cut() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("output.log");
        let ps = p.to_string_lossy().into_owned();
        let cap = 1 << 20;
        let chunk = alphabet(256 * 1024);
        let mut cuts = false;
        for _ in 0..24 {
            append(&p, &chunk);
            keep_newest(&ps, cap).unwrap();
            cuts |= base_of(&std::fs::File::open(&p).unwrap()) > 0;
        }
        assert_eq!(size(&ps), 24 * 256 * 1024);
        let file_len = std::fs::metadata(&p).unwrap().len();
        // ext4 and XFS cut; only another filesystem (tmpfs) may punch.
        let fs = rustix::fs::statfs(dir.path()).unwrap().f_type as u64;
        if !cuts {
            assert!(
                ![0xEF53, 0x5846_5342].contains(&fs),
                "ext4 or XFS (0x{fs:x}) did not cut the log"
            );
            return;
        }
        assert!(
            file_len <= cap,
            "{file_len} bytes kept under a {cap}-byte cap"
        );
        let (bytes, _) = read(&ps, size(&ps) - 1, 1).unwrap();
        assert_eq!(bytes, vec![chunk[chunk.len() - 1]]);
    }
}
