//! The log writer: `lab __logger <socket>`, one per tmux server, in the
//! pane of lab's control session ([`tmux::CONTROL_SESSION`]). It is a
//! control-mode client of that session, where every run's window is also
//! linked, so one process carries every pane's output to its run's log
//! (instead of a `pipe-pane` process per run). It lives in tmux, not in
//! lab: a lab restart loses no byte.
//!
//! A pane says where its log is in its `@lab_log` option (set by the exec
//! shim before it links its window here); the writer asks for it the first
//! time the pane prints and keeps what came meanwhile. A pane without the
//! option (the writer's own) is not logged.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::tmux::control::{Notice, parse};
use super::tmux::{CONTROL_SESSION, scrub_env};

/// What a pane's output goes to.
enum Sink {
    /// Waiting for its log's path; what it printed meanwhile.
    Asked(Vec<u8>),
    Log(File),
    /// Not a run's pane, or its log cannot be opened.
    Dropped,
}

/// A command this client sent, answered in order.
enum Asked {
    LogOf(u32),
    LivePanes,
}

/// The writer's state: one sink per pane it has seen print.
#[derive(Default)]
pub struct Writer {
    sinks: HashMap<u32, Sink>,
    asked: VecDeque<Asked>,
}

impl Writer {
    /// Takes one line of the control client's output; returns the commands
    /// to send (each ends with `\n`), or `None` when the client exited.
    pub fn line(&mut self, line: &[u8], answer: &mut Option<Answer>) -> Option<Vec<String>> {
        let notice = parse(line);
        if let Some(a) = answer {
            match notice {
                Notice::End { ok } => {
                    let a = answer.take().expect("an answer");
                    return Some(self.answered(a, ok));
                }
                _ => {
                    a.lines.push(line.to_vec());
                    return Some(Vec::new());
                }
            }
        }
        match notice {
            Notice::Output { pane, bytes } => Some(self.output(pane, bytes)),
            Notice::Begin { ours } => {
                *answer = Some(Answer {
                    ours,
                    lines: Vec::new(),
                });
                Some(Vec::new())
            }
            Notice::WindowClosed => {
                self.asked.push_back(Asked::LivePanes);
                Some(vec!["list-panes -a -F '#{pane_id}'\n".to_owned()])
            }
            Notice::Exit => None,
            Notice::End { .. } | Notice::Other(_) => Some(Vec::new()),
        }
    }

    fn output(&mut self, pane: u32, bytes: Vec<u8>) -> Vec<String> {
        match self.sinks.get_mut(&pane) {
            Some(Sink::Log(f)) => {
                if let Err(e) = f.write_all(&bytes) {
                    eprintln!("lab logger: cannot write pane %{pane}'s log: {e}");
                }
                Vec::new()
            }
            Some(Sink::Asked(pending)) => {
                pending.extend_from_slice(&bytes);
                Vec::new()
            }
            Some(Sink::Dropped) => Vec::new(),
            None => {
                self.sinks.insert(pane, Sink::Asked(bytes));
                self.asked.push_back(Asked::LogOf(pane));
                vec![format!("display-message -p -t %{pane} '#{{@lab_log}}'\n")]
            }
        }
    }

    fn answered(&mut self, a: Answer, ok: bool) -> Vec<String> {
        if !a.ours {
            return Vec::new();
        }
        match self.asked.pop_front() {
            Some(Asked::LogOf(pane)) => {
                let path = a.lines.first().filter(|p| ok && !p.is_empty());
                let sink = match path.map(|p| open_log(Path::new(&*String::from_utf8_lossy(p)))) {
                    Some(Ok(mut f)) => {
                        if let Some(Sink::Asked(pending)) = self.sinks.get(&pane)
                            && let Err(e) = f.write_all(pending)
                        {
                            eprintln!("lab logger: cannot write pane %{pane}'s log: {e}");
                        }
                        Sink::Log(f)
                    }
                    Some(Err(e)) => {
                        eprintln!("lab logger: cannot open pane %{pane}'s log: {e}");
                        Sink::Dropped
                    }
                    None => Sink::Dropped,
                };
                self.sinks.insert(pane, sink);
            }
            Some(Asked::LivePanes) if ok => {
                let live: HashSet<u32> = a
                    .lines
                    .iter()
                    .filter_map(|l| {
                        std::str::from_utf8(l.strip_prefix(b"%")?)
                            .ok()?
                            .parse()
                            .ok()
                    })
                    .collect();
                // A pane that is gone prints no more: its log is closed. One
                // still asked about keeps its place until the answer.
                self.sinks
                    .retain(|id, s| live.contains(id) || matches!(s, Sink::Asked(_)));
            }
            Some(Asked::LivePanes) | None => {}
        }
        Vec::new()
    }

    /// Panes whose output goes to a log now.
    pub fn logging(&self) -> usize {
        self.sinks
            .values()
            .filter(|s| matches!(s, Sink::Log(_)))
            .count()
    }
}

/// The lines of an answer being read.
pub struct Answer {
    ours: bool,
    lines: Vec<Vec<u8>>,
}

/// A run's log, appended to; never through a link (the run's folder is
/// lab's, but a log path is read from a pane option).
fn open_log(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// The writer's body: attaches to the control session and logs until the
/// session or the server is gone. Returns the exit code.
pub fn logger_main(socket: &Path) -> i32 {
    let mut c = Command::new("tmux");
    c.arg("-S")
        .arg(socket)
        .args(["-C", "attach-session", "-f", "ignore-size", "-t"])
        .arg(format!("={CONTROL_SESSION}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    scrub_env(&mut c);
    let mut child = match c.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lab logger: cannot start tmux: {e}");
            return 1;
        }
    };
    let mut input = child.stdin.take().expect("piped");
    let mut out = BufReader::with_capacity(1 << 16, child.stdout.take().expect("piped"));
    let mut writer = Writer::default();
    let mut answer = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        match out.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("lab logger: reading tmux: {e}");
                break;
            }
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        match writer.line(&line, &mut answer) {
            Some(cmds) => {
                for cmd in cmds {
                    if input.write_all(cmd.as_bytes()).is_err() {
                        break;
                    }
                }
            }
            None => break,
        }
    }
    drop(input);
    let _ = child.wait();
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(w: &mut Writer, a: &mut Option<Answer>, lines: &[&[u8]]) -> Vec<String> {
        lines
            .iter()
            .flat_map(|l| w.line(l, a).expect("still attached"))
            .collect()
    }

    #[test]
    fn output_waits_for_its_log_then_goes_there_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut w = Writer::default();
        let mut a = None;
        let sent = feed(
            &mut w,
            &mut a,
            &[b"%output %5 one\\015\\012", b"%output %5 two"],
        );
        assert_eq!(sent, ["display-message -p -t %5 '#{@lab_log}'\n"]);
        let path = log.to_string_lossy().into_owned();
        feed(
            &mut w,
            &mut a,
            &[
                b"%begin 1 2 1",
                path.as_bytes(),
                b"%end 1 2 1",
                b"%output %5 \\134three",
            ],
        );
        assert_eq!(std::fs::read(&log).unwrap(), b"one\r\ntwo\\three");
        assert_eq!(w.logging(), 1);
    }

    #[test]
    fn panes_without_a_log_are_dropped_and_gone_panes_closed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let path = log.to_string_lossy().into_owned();
        let mut w = Writer::default();
        let mut a = None;
        // Pane 0 (the writer's own) has no log; pane 7 has one.
        feed(&mut w, &mut a, &[b"%output %0 x", b"%output %7 y"]);
        // Someone else's command answered in between: not ours.
        feed(
            &mut w,
            &mut a,
            &[b"%begin 1 1 0", b"whatever", b"%end 1 1 0"],
        );
        feed(&mut w, &mut a, &[b"%begin 1 2 1", b"", b"%end 1 2 1"]);
        feed(
            &mut w,
            &mut a,
            &[b"%begin 1 3 1", path.as_bytes(), b"%end 1 3 1"],
        );
        feed(&mut w, &mut a, &[b"%output %0 more"]);
        assert_eq!(std::fs::read(&log).unwrap(), b"y");
        assert_eq!(w.logging(), 1);
        // A window closed: the writer asks which panes live, and closes 7's log.
        let sent = feed(&mut w, &mut a, &[b"%unlinked-window-close @3"]);
        assert_eq!(sent, ["list-panes -a -F '#{pane_id}'\n"]);
        feed(&mut w, &mut a, &[b"%begin 1 4 1", b"%0", b"%end 1 4 1"]);
        assert_eq!(w.logging(), 0);
        assert!(w.line(b"%exit", &mut a).is_none());
    }

    #[test]
    fn a_log_that_is_a_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let log = dir.path().join("log");
        std::os::unix::fs::symlink(&target, &log).unwrap();
        let path = log.to_string_lossy().into_owned();
        let mut w = Writer::default();
        let mut a = None;
        feed(&mut w, &mut a, &[b"%output %2 secret"]);
        feed(
            &mut w,
            &mut a,
            &[b"%begin 1 2 1", path.as_bytes(), b"%end 1 2 1"],
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"");
        assert_eq!(w.logging(), 0);
    }
}
