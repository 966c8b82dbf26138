//! A log's bytes as plain text (`labctl logs --raw --strip`, the output
//! API's `text` format): printed characters kept, escapes dropped, and the
//! cursor moves a TUI uses instead of spaces and line breaks turned back
//! into them, so words do not run together.
//!
//! Pure: the agent's bytes are parsed here (by `vte`, the parser terminal
//! emulators use) and never acted on.

use vte::{Params, Parser, Perform};

/// The most spaces one cursor move becomes.
const MAX_GAP: usize = 8;

/// Text of terminal output.
pub fn text(bytes: &[u8]) -> Vec<u8> {
    let mut t = Text::default();
    let mut parser = Parser::new();
    parser.advance(&mut t, bytes);
    t.out.into_bytes()
}

#[derive(Default)]
struct Text {
    out: String,
    /// A carriage return not yet followed by a line feed.
    cr: bool,
}

impl Text {
    fn at_line_start(&self) -> bool {
        self.out.is_empty() || self.out.ends_with('\n')
    }

    fn newline(&mut self) {
        if !self.at_line_start() {
            self.out.push('\n');
        }
    }

    /// A gap: at most [`MAX_GAP`] spaces, so the text is never much larger
    /// than the bytes the agent wrote (a wider jump is layout, not words).
    fn space(&mut self, n: usize) {
        if !self.at_line_start() && !self.out.ends_with(' ') {
            self.out
                .extend(std::iter::repeat_n(' ', n.clamp(1, MAX_GAP)));
        }
    }

    fn settle_cr(&mut self) {
        if std::mem::take(&mut self.cr) {
            // A bare carriage return redraws the line: start a new one.
            self.newline();
        }
    }
}

impl Perform for Text {
    fn print(&mut self, c: char) {
        self.settle_cr();
        self.out.push(c);
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => {
                self.cr = false;
                self.out.push('\n');
            }
            b'\r' => self.cr = true,
            b'\t' => {
                self.settle_cr();
                self.out.push('\t');
            }
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, _: &[u8], _: bool, action: char) {
        let first = params
            .iter()
            .next()
            .and_then(|p| p.first().copied())
            .unwrap_or(1)
            .max(1) as usize;
        match action {
            // Cursor forward, or to a column: the gap a TUI leaves.
            'C' => {
                self.settle_cr();
                self.space(first);
            }
            'G' | '`' => {
                self.settle_cr();
                self.space(1);
            }
            // Down, next line, to a row (and column): a new line.
            'B' | 'E' | 'H' | 'f' | 'd' => {
                self.cr = false;
                self.newline();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(b: &[u8]) -> String {
        String::from_utf8(text(b)).unwrap()
    }

    #[test]
    fn cursor_moves_become_spaces_and_lines() {
        // Words a TUI separates with cursor-forward, rows placed by position.
        assert_eq!(
            t(b"\x1b[1;1H\x1b[1mHello\x1b[0m\x1b[1Cworld\x1b[2;1Hnext\x1b[3Cline"),
            "Hello world\nnext   line"
        );
        assert_eq!(t(b"a\r\nb\rc\n"), "a\nb\nc\n");
        // A hostile jump does not blow the text up.
        let jumps = b"x\x1b[9999C".repeat(1000);
        assert!(text(&jumps).len() <= jumps.len() * 2);
        assert_eq!(t(b"\x1b]0;title\x07plain \x1b[31mred\x1b[0m"), "plain red");
    }
}
