//! What a person may type into a run (`POST /runs/{id}/input`): text, sent
//! as it is, and keys from this fixed list. A key name never reaches tmux
//! from a request: each key maps to a name lab wrote.

use super::spelled::spelled;

spelled! {
    /// A named key.
    pub enum Key ("key") {
        Enter = "Enter",
        Escape = "Escape",
        Tab = "Tab",
        /// Shift-Tab (Claude Code cycles its modes with it).
        BackTab = "BTab",
        Up = "Up",
        Down = "Down",
        Left = "Left",
        Right = "Right",
        Backspace = "Backspace",
        Space = "Space",
        PageUp = "PageUp",
        PageDown = "PageDown",
        CtrlC = "C-c",
        CtrlD = "C-d",
        D0 = "0",
        D1 = "1",
        D2 = "2",
        D3 = "3",
        D4 = "4",
        D5 = "5",
        D6 = "6",
        D7 = "7",
        D8 = "8",
        D9 = "9",
    }
}

impl Key {
    /// The key's name in tmux's `send-keys`.
    pub fn tmux_name(self) -> &'static str {
        match self {
            Key::Backspace => "BSpace",
            Key::PageUp => "PPage",
            Key::PageDown => "NPage",
            other => other.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_map_to_tmux_names() {
        for k in Key::ALL {
            assert_eq!(k.as_str().parse::<Key>().unwrap(), *k);
            assert!(!k.tmux_name().is_empty());
        }
        assert_eq!(Key::Backspace.tmux_name(), "BSpace");
        let e = "Enter;".parse::<Key>().unwrap_err();
        assert!(e.contains("allowed"), "{e}");
        assert!("enter".parse::<Key>().is_err(), "spelled one way");
    }
}
