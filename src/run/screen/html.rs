//! One screen row as HTML: runs of cells with the same look become one
//! `<span>`. The 16 basic colours are classes (`f1`, `b4`), so the page's
//! style sheet picks shades that read on its background; the 256-colour
//! palette and true colour are inline styles.

use std::fmt::Write;

use vt100::Color;

#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct Look {
    fg: Color,
    bg: Color,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    inverse: bool,
    cursor: bool,
}

impl Look {
    fn of(c: &vt100::Cell, cursor: bool) -> Look {
        Look {
            fg: c.fgcolor(),
            bg: c.bgcolor(),
            bold: c.bold(),
            dim: c.dim(),
            italic: c.italic(),
            underline: c.underline(),
            inverse: c.inverse(),
            cursor,
        }
    }

    fn plain(&self) -> bool {
        *self == Look::default()
    }

    fn open(&self, out: &mut String) {
        let (fg, bg) = if self.inverse {
            (self.bg, self.fg)
        } else {
            (self.fg, self.bg)
        };
        let mut class = String::new();
        let mut style = String::new();
        colour(&mut class, &mut style, 'f', "color", fg);
        colour(&mut class, &mut style, 'b', "background", bg);
        if self.inverse {
            // Default colours swapped: the page's own pair, reversed.
            if fg == Color::Default {
                class.push_str(" fi");
            }
            if bg == Color::Default {
                class.push_str(" bi");
            }
        }
        for (on, name) in [
            (self.bold, " bo"),
            (self.dim, " dm"),
            (self.italic, " it"),
            (self.underline, " un"),
            (self.cursor, " cur"),
        ] {
            if on {
                class.push_str(name);
            }
        }
        out.push_str("<span");
        if !class.is_empty() {
            let _ = write!(out, " class=\"{}\"", class.trim_start());
        }
        if !style.is_empty() {
            let _ = write!(out, " style=\"{style}\"");
        }
        out.push('>');
    }
}

fn colour(class: &mut String, style: &mut String, prefix: char, prop: &str, c: Color) {
    match c {
        Color::Default => {}
        Color::Idx(i) if i < 16 => {
            let _ = write!(class, " {prefix}{i}");
        }
        Color::Idx(i) => {
            let (r, g, b) = palette(i);
            let _ = write!(style, "{prop}:#{r:02x}{g:02x}{b:02x};");
        }
        Color::Rgb(r, g, b) => {
            let _ = write!(style, "{prop}:#{r:02x}{g:02x}{b:02x};");
        }
    }
}

/// xterm's 256-colour palette above the first 16: a 6×6×6 cube, then 24
/// greys.
fn palette(i: u8) -> (u8, u8, u8) {
    if i >= 232 {
        let v = 8 + 10 * (i - 232);
        return (v, v, v);
    }
    let i = i - 16;
    let step = |n: u8| if n == 0 { 0 } else { 55 + 40 * n };
    (step(i / 36), step((i / 6) % 6), step(i % 6))
}

fn escape(out: &mut String, s: &str) {
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Row `row` of the screen's current view; `cursor` is the cursor's column
/// when it is on this row. Trailing blank, plain cells are left out.
pub fn row(s: &vt100::Screen, row: u16, cursor: Option<u16>) -> String {
    let cols = s.size().1.get();
    // The last cell that shows something: text, a background, the cursor.
    let mut end = 0;
    for col in 0..cols {
        if let Some(c) = s.cell(row, col) {
            let look = Look::of(c, cursor == Some(col));
            if c.has_contents() || look.bg != Color::Default || look.inverse || look.cursor {
                end = col + 1;
            }
        }
    }
    let mut out = String::new();
    let mut open: Option<Look> = None;
    let mut col = 0;
    while col < end {
        let Some(c) = s.cell(row, col) else { break };
        col += 1;
        if c.is_wide_continuation() {
            continue;
        }
        let look = Look::of(c, cursor == Some(col - 1));
        if open != Some(look) {
            if open.is_some_and(|o| !o.plain()) {
                out.push_str("</span>");
            }
            if !look.plain() {
                look.open(&mut out);
            }
            open = Some(look);
        }
        if c.has_contents() {
            escape(&mut out, c.contents());
        } else {
            out.push(' ');
        }
    }
    if open.is_some_and(|o| !o.plain()) {
        out.push_str("</span>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palette_corners() {
        assert_eq!(palette(16), (0, 0, 0));
        assert_eq!(palette(231), (255, 255, 255));
        assert_eq!(palette(196), (255, 0, 0));
        assert_eq!(palette(232), (8, 8, 8));
        assert_eq!(palette(255), (238, 238, 238));
    }
}
