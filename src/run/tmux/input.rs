//! Typing into a run's pane: text as it is, then keys lab names.

use tmux_interface::{SendKeys, TmuxCommands};

use super::args::arg;
use super::{Tmux, TmuxError, chain};

impl Tmux {
    /// Types into a session's pane: `text` as it is (`send-keys -l`: no
    /// character is read as a key name), then each of `keys`, which must
    /// be tmux key names lab chose (see `domain::Key`). A long text goes in
    /// pieces of at most [`INPUT_PIECE`] bytes, one tmux call each (a
    /// client's command travels in one message of about 16 KiB); the keys
    /// ride with the last.
    pub async fn send_input(
        &self,
        session: &str,
        text: &str,
        keys: &[&str],
    ) -> Result<(), TmuxError> {
        let target = format!("={session}:");
        let pieces = pieces(text, INPUT_PIECE);
        let last = pieces.len().saturating_sub(1);
        for (i, piece) in pieces.iter().enumerate() {
            let mut cmds = TmuxCommands::new();
            if !piece.is_empty() {
                let mut literal = SendKeys::new()
                    .disable_lookup()
                    .target_pane(target.clone())
                    .build();
                // `--`: a text that starts with `-` is not read as a flag.
                literal.push_param("--");
                literal.push_param(arg(piece));
                cmds = cmds.add_command(literal);
            }
            if i == last {
                for key in keys {
                    cmds = cmds.add_command(
                        SendKeys::new()
                            .target_pane(target.clone())
                            .key(arg(key))
                            .build(),
                    );
                }
            }
            self.run("send-keys", chain(self.base(), cmds)).await?;
        }
        Ok(())
    }
}

/// The most bytes of text one `send-keys` call carries.
pub const INPUT_PIECE: usize = 4096;

/// `text` cut at character boundaries into pieces of at most `max` bytes;
/// one empty piece for an empty text.
fn pieces(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out.push(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_goes_in_pieces_cut_between_characters() {
        assert_eq!(pieces("", 4), [""]);
        assert_eq!(pieces("abcd", 4), ["abcd"]);
        assert_eq!(pieces("abcdef", 4), ["abcd", "ef"]);
        // "é" is two bytes: never split.
        assert_eq!(pieces("aéé", 4), ["aé", "é"]);
        let long = "é".repeat(10_000);
        let p = pieces(&long, INPUT_PIECE);
        assert!(p.iter().all(|x| x.len() <= INPUT_PIECE));
        assert_eq!(p.concat(), long);
    }
}
