use super::*;

fn emu(bytes: &[u8]) -> Emulator {
    let mut e = Emulator::new(5, 20);
    e.feed(bytes);
    e
}

#[test]
fn cursor_positioned_text_lands_in_place() {
    // Clear, then words written out of order with absolute moves.
    let mut e = emu(b"\x1b[2J\x1b[2;7Hworld\x1b[2;1HHello,\x1b[4;3H\x1b[1mbold\x1b[0m");
    assert_eq!(e.text(0), "\nHello,world\n\n  bold\n");
    assert_eq!(e.offset(), 45);
}

#[test]
fn erased_and_overwritten_text_is_gone() {
    // A spinner redrawn in place, then a line erased to its end.
    let mut e = emu(b"\xe2\x9c\xbd thinking\r\xe2\x9c\xbb thinking\r\x1b[Kdone");
    assert_eq!(e.text(0).lines().next(), Some("done"));
}

#[test]
fn scrolled_lines_come_back_as_history() {
    let mut e = emu(b"1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n7\r\n8");
    assert_eq!(e.text(0), "4\n5\n6\n7\n8");
    assert_eq!(e.history_len(), 3);
    assert_eq!(e.text(2), "2\n3\n4\n5\n6\n7\n8");
    assert_eq!(e.text(99), "1\n2\n3\n4\n5\n6\n7\n8");
    // Reading history leaves the view at the live screen.
    assert_eq!(e.text(0), "4\n5\n6\n7\n8");
}

#[test]
fn history_longer_than_the_screen_comes_in_order() {
    let mut bytes = Vec::new();
    for i in 1..=23 {
        bytes.extend_from_slice(format!("{i}\r\n").as_bytes());
    }
    let mut e = emu(&bytes);
    let text = e.text(1000);
    let want: Vec<String> = (1..=23).map(|i| i.to_string()).collect();
    assert_eq!(text, format!("{}\n", want.join("\n")));
}

#[test]
fn wide_characters_keep_their_neighbours() {
    let mut e = emu("日本 ok".as_bytes());
    assert_eq!(e.text(0).lines().next(), Some("日本 ok"));
    assert!(e.html(0).starts_with("日本 ok"), "{}", e.html(0));
}

#[test]
fn html_escapes_and_styles() {
    let mut e = emu(
        b"\x1b[31;1m<b>&\x1b[0m \x1b[38;5;196mx\x1b[48;2;1;2;3my\x1b[0m\x1b[7mz\x1b[0m\x1b[?25l",
    );
    let html = e.html(0);
    let first = html.lines().next().unwrap();
    assert_eq!(
        first,
        "<span class=\"f1 bo\">&lt;b&gt;&amp;</span> \
         <span style=\"color:#ff0000;\">x</span>\
         <span style=\"color:#ff0000;background:#010203;\">y</span>\
         <span class=\"fi bi\">z</span>"
    );
    assert_eq!(html.split('\n').count(), 5);
}

#[test]
fn the_cursor_is_marked_while_shown() {
    let mut e = emu(b"ab");
    assert_eq!(
        e.html(0).lines().next(),
        Some("ab<span class=\"cur\"> </span>")
    );
    let mut e = emu(b"ab\x1b[?25l");
    assert_eq!(e.html(0).lines().next(), Some("ab"));
}

#[test]
fn a_log_is_caught_up_from_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    let mut e = Emulator::new(3, 10);
    assert!(!e.catch_up(&log).unwrap(), "no log yet is no screen");
    std::fs::write(&log, b"one\r\n").unwrap();
    assert!(e.catch_up(&log).unwrap());
    assert!(!e.catch_up(&log).unwrap());
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, b"two").unwrap();
    assert!(e.catch_up(&log).unwrap());
    assert_eq!(e.text(0), "one\ntwo\n");
    assert_eq!(e.offset(), 8);
    // A log that shrank was replaced: replayed from its start.
    std::fs::write(&log, b"new").unwrap();
    assert!(e.catch_up(&log).unwrap());
    assert_eq!(e.text(0), "new\n\n");
}

#[test]
fn csi_s_and_u_save_and_restore_the_cursor_as_in_tmux() {
    // tmux reads CSI s / CSI u as DECSC / DECRC; a status line drawn
    // between them leaves the text's cursor where it was, so it scrolls.
    let mut log = Vec::new();
    for i in 0..20 {
        log.extend_from_slice(format!("\x1b[s\x1b[5;1H\x1b[2Kstatus {i}\x1b[u").as_bytes());
        log.extend_from_slice(format!("line {i}\r\n").as_bytes());
    }
    let mut whole = Emulator::new(5, 20);
    whole.feed(&log);
    assert!(whole.history_len() >= 15, "{}", whole.history_len());
    // Split at every byte: sequences cut between two reads count the same.
    let mut bytewise = Emulator::new(5, 20);
    for b in &log {
        bytewise.feed(std::slice::from_ref(b));
    }
    assert_eq!(bytewise.text(100), whole.text(100));
    assert_eq!(bytewise.offset(), log.len() as u64);
    // Other sequences that start the same way pass through.
    let mut e = emu(b"\x1b[sab\x1b[1;1Hc\x1b[ud\x1b[31mx");
    // Saved at the origin; "ab"; "c" over "a"; back to the origin: "d" over
    // "c", then "x" (red: the SGR passed through) over "b".
    assert_eq!(e.text(0).lines().next(), Some("dx"));
    assert!(
        e.html(0).starts_with("d<span class=\"f1\">x</span>"),
        "{}",
        e.html(0)
    );
}
