//! A run's log: every byte its pane printed, appended by the pane itself
//! (`tmux::attach_log`). Readers take it from an offset.

use std::io::{Read, Seek, SeekFrom};

/// Reads a log from `offset`: the bytes and the offset after them.
pub fn read(path: &str, offset: u64, max: u64) -> std::io::Result<(Vec<u8>, u64)> {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = offset.min(len);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(max).read_to_end(&mut buf)?;
    let next = start + buf.len() as u64;
    Ok((buf, next))
}
