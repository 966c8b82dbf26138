//! tmux's control mode (`tmux -C`), as lab's log writer reads it: one line
//! per notification; a pane's output comes as `%output %<pane> <bytes>` with
//! every byte below a space, and `\`, written as a backslash and three
//! octal digits; the answer to a command sent on the client's input comes
//! between `%begin` and `%end` (or `%error`), never mixed with
//! notifications.

/// One line of a control client's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Bytes a pane printed.
    Output { pane: u32, bytes: Vec<u8> },
    /// The start of a command's answer; `ours` when this client sent it.
    Begin { ours: bool },
    /// The end of an answer; `ok` unless the command failed.
    End { ok: bool },
    /// A window went (from this session, or from every session).
    WindowClosed,
    /// The client is detached: the server or the session is gone.
    Exit,
    /// A line inside an answer, or a notification lab does not use.
    Other(Vec<u8>),
}

/// Reads one line (without its `\n`).
pub fn parse(line: &[u8]) -> Notice {
    let word = |s: &[u8]| line.starts_with(s) && matches!(line.get(s.len()), None | Some(b' '));
    if let Some(rest) = line.strip_prefix(b"%output %") {
        let (id, data) = match rest.iter().position(|b| *b == b' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &[][..]),
        };
        if let Some(pane) = std::str::from_utf8(id).ok().and_then(|s| s.parse().ok()) {
            return Notice::Output {
                pane,
                bytes: unescape(data),
            };
        }
    } else if word(b"%begin") {
        // `%begin <time> <number> <flags>`: flag 1 marks this client's own.
        let ours = line
            .rsplit(|b| *b == b' ')
            .next()
            .and_then(|f| std::str::from_utf8(f).ok()?.parse::<u32>().ok())
            .is_some_and(|f| f & 1 == 1);
        return Notice::Begin { ours };
    } else if word(b"%end") {
        return Notice::End { ok: true };
    } else if word(b"%error") {
        return Notice::End { ok: false };
    } else if word(b"%window-close") || word(b"%unlinked-window-close") {
        return Notice::WindowClosed;
    } else if word(b"%exit") {
        return Notice::Exit;
    }
    Notice::Other(line.to_vec())
}

/// A pane's bytes from their control-mode form.
pub fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\'
            && let Some(oct) = s.get(i + 1..i + 4)
            && oct.iter().all(|d| (b'0'..=b'7').contains(d))
        {
            let v = oct
                .iter()
                .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_unescaped() {
        // As tmux 3.3a sent `printf 'hello\033[31m red\\ \r\n'`.
        assert_eq!(
            parse(br"%output %1 hello\033[31m red\134 \015\015\012"),
            Notice::Output {
                pane: 1,
                bytes: b"hello\x1b[31m red\\ \r\r\n".to_vec()
            }
        );
        // Bytes above 127 (UTF-8) come as they are.
        assert_eq!(
            parse("%output %12 ✻ ok".as_bytes()),
            Notice::Output {
                pane: 12,
                bytes: "✻ ok".as_bytes().to_vec()
            }
        );
        assert_eq!(
            parse(b"%output %3 "),
            Notice::Output {
                pane: 3,
                bytes: vec![]
            }
        );
        assert_eq!(unescape(br"\000\377\1x\\"), b"\x00\xff\\1x\\\\".to_vec());
    }

    #[test]
    fn answers_and_notifications() {
        assert_eq!(
            parse(b"%begin 1796127151 281 1"),
            Notice::Begin { ours: true }
        );
        assert_eq!(
            parse(b"%begin 1796127149 276 0"),
            Notice::Begin { ours: false }
        );
        assert_eq!(parse(b"%end 1796127151 281 1"), Notice::End { ok: true });
        assert_eq!(parse(b"%error 1796127151 281 1"), Notice::End { ok: false });
        assert_eq!(parse(b"%window-close @4"), Notice::WindowClosed);
        assert_eq!(parse(b"%unlinked-window-close @4"), Notice::WindowClosed);
        assert_eq!(parse(b"%exit"), Notice::Exit);
        assert_eq!(parse(b"%exit too far behind"), Notice::Exit);
        assert_eq!(
            parse(b"/data/runs/1/log"),
            Notice::Other(b"/data/runs/1/log".to_vec())
        );
        assert_eq!(parse(b"%endless"), Notice::Other(b"%endless".to_vec()));
        assert_eq!(
            parse(b"%output %x y"),
            Notice::Other(b"%output %x y".to_vec())
        );
    }
}
