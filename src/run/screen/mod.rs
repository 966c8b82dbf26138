//! A run's screen as its CLI drew it: the log replayed through a terminal
//! emulator (`vt100`, ADR 14) the size of the run's pane.
//!
//! The log is every byte the pane printed; a TUI draws with cursor moves,
//! erases and colours, so the text without its escapes is not what a person
//! saw. Replaying it gives the screen tmux shows (`capture-pane -p`), the
//! lines that scrolled off above it, and each cell's colours.
//!
//! Nothing here runs per byte as the agent prints: an emulator is fed only
//! when someone asks for a screen, from where it stopped the last time
//! ([`Screens`] keeps one per run that was looked at recently).

mod cache;
mod html;

use std::io::Read;
use std::num::NonZeroU16;
use std::path::Path;

pub use cache::Screens;

use crate::domain::ScreenFormat;

/// One look at a screen, in one format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shot {
    /// The text, HTML or escapes.
    pub body: String,
    /// Lines from above the screen that come first.
    pub history: usize,
    /// (row, col) of the cursor.
    pub cursor: (u16, u16),
    pub cursor_visible: bool,
    /// Bytes of the log replayed.
    pub offset: u64,
}

/// Lines above the screen an emulator keeps.
pub const SCROLLBACK: usize = 2_000;

/// How much of the log is read in one go while catching up.
const CHUNK: usize = 1 << 20;

/// A terminal emulator fed from one run's log.
pub struct Emulator {
    parser: vt100::Parser,
    /// Bytes of the log replayed so far.
    offset: u64,
    /// The start of a `CSI s`/`CSI u` cut off at the end of the last feed.
    pending: Vec<u8>,
}

impl Emulator {
    pub fn new(rows: u16, cols: u16) -> Emulator {
        let nz = |n: u16| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
        Emulator {
            parser: vt100::Parser::new(nz(rows), nz(cols), SCROLLBACK),
            offset: 0,
            pending: Vec::new(),
        }
    }

    /// Bytes of the log replayed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        let mut rest = bytes;
        if !self.pending.is_empty() {
            while self.pending.len() < 3 && !rest.is_empty() {
                self.pending.push(rest[0]);
                rest = &rest[1..];
            }
            if self.pending.len() < 3 {
                return;
            }
            let seq = std::mem::take(&mut self.pending);
            self.process(&seq);
        }
        // An `ESC` or `ESC [` at the very end waits for what follows.
        let keep = match rest {
            [.., 0x1b] => 1,
            [.., 0x1b, b'['] => 2,
            _ => 0,
        };
        let (now, later) = rest.split_at(rest.len() - keep);
        self.process(now);
        self.pending.extend_from_slice(later);
    }

    /// Feeds the parser, with tmux's reading of `CSI s` and `CSI u`: save
    /// and restore the cursor, as `ESC 7` and `ESC 8` (which `vt100` knows;
    /// it ignores the first two).
    fn process(&mut self, bytes: &[u8]) {
        let mut start = 0;
        let mut at = 0;
        while let Some(i) = bytes[at..].iter().position(|b| *b == 0x1b) {
            let esc = at + i;
            match bytes.get(esc + 1..esc + 3) {
                Some(b"[s") | Some(b"[u") => {
                    self.parser.process(&bytes[start..esc]);
                    let save = bytes[esc + 2] == b's';
                    self.parser.process(if save { b"\x1b7" } else { b"\x1b8" });
                    start = esc + 3;
                    at = start;
                }
                _ => at = esc + 1,
            }
        }
        self.parser.process(&bytes[start..]);
    }

    /// Replays what the log gained since the last call. A log shorter than
    /// what was replayed (it was replaced) is replayed from its start.
    /// Returns whether anything was fed. Blocking IO.
    pub fn catch_up(&mut self, log: &Path) -> std::io::Result<bool> {
        let Some(mut log) = super::log::Log::open(&log.to_string_lossy())? else {
            return Ok(false);
        };
        let len = log.len();
        if len < self.offset {
            let (rows, cols) = self.size();
            *self = Emulator::new(rows, cols);
        }
        if len == self.offset {
            return Ok(false);
        }
        // Past output lab dropped (`runs.log_max_mb`): on from what is kept.
        let (mut f, start) = log.read_from(self.offset)?;
        self.offset = start;
        let mut buf = vec![0; CHUNK];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(true);
            }
            self.feed(&buf[..n]);
        }
    }

    /// (rows, cols).
    pub fn size(&self) -> (u16, u16) {
        let (r, c) = self.parser.screen().size();
        (r.get(), c.get())
    }

    /// (row, col) of the cursor, and whether the CLI shows it.
    pub fn cursor(&self) -> ((u16, u16), bool) {
        let s = self.parser.screen();
        (s.cursor_position(), !s.hide_cursor())
    }

    /// The screen in `format`, with up to `history` lines from above it.
    pub fn shot(&mut self, format: ScreenFormat, history: usize) -> Shot {
        let history = history.min(self.history_len());
        let body = match format {
            ScreenFormat::Text => self.text(history),
            ScreenFormat::Html => self.html(history),
            // The escapes redraw the screen only: a terminal keeps its own
            // history.
            ScreenFormat::Ansi => self.parser.screen().contents_formatted(),
        };
        let history = if format == ScreenFormat::Ansi {
            0
        } else {
            history
        };
        let (cursor, cursor_visible) = self.cursor();
        Shot {
            body,
            history,
            cursor,
            cursor_visible,
            offset: self.offset,
        }
    }

    /// How many lines the screen scrolled past and keeps.
    pub fn history_len(&mut self) -> usize {
        let s = self.parser.screen_mut();
        s.set_scrollback(usize::MAX);
        let n = s.scrollback();
        s.set_scrollback(0);
        n
    }

    /// The screen's rows as text, trailing blanks trimmed, as
    /// `tmux capture-pane -p` prints them; `history` lines from above the
    /// screen come first.
    pub fn text(&mut self, history: usize) -> String {
        let mut lines = self.history_rows(history, |s, rows| {
            s.rows(0, s.size().1.get())
                .take(rows)
                .map(|l| l.trim_end().to_owned())
                .collect()
        });
        let s = self.parser.screen();
        lines.extend(s.rows(0, s.size().1.get()).map(|l| l.trim_end().to_owned()));
        lines.join("\n")
    }

    /// The same lines as HTML: spans with classes for attributes and the 16
    /// colours, inline colours for the others; rows end with `\n`; for use
    /// inside a `<pre>`.
    pub fn html(&mut self, history: usize) -> String {
        let cursor = self.cursor();
        let mut lines = self.history_rows(history, |s, rows| {
            (0..rows as u16).map(|r| html::row(s, r, None)).collect()
        });
        let s = self.parser.screen();
        let (rows, _) = s.size();
        for r in 0..rows.get() {
            let cur = (cursor.1 && cursor.0.0 == r).then_some(cursor.0.1);
            lines.push(html::row(s, r, cur));
        }
        lines.join("\n")
    }

    /// Rows from the scrollback: `read(screen, n)` is called with the view
    /// moved up so that its first `n` rows are the next lines wanted.
    fn history_rows(
        &mut self,
        want: usize,
        read: impl Fn(&vt100::Screen, usize) -> Vec<String>,
    ) -> Vec<String> {
        if want == 0 {
            return Vec::new();
        }
        let want = want.min(self.history_len());
        let s = self.parser.screen_mut();
        let rows = usize::from(s.size().0.get());
        let mut out = Vec::with_capacity(want);
        let mut above = want;
        while above > 0 {
            s.set_scrollback(above);
            let take = above.min(rows);
            out.extend(read(s, take));
            above -= take;
        }
        s.set_scrollback(0);
        out
    }
}

#[cfg(test)]
mod tests;
