//! A file's patch read as hunks of numbered lines.

/// What a line of a hunk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Context,
    Added,
    Removed,
    /// `\ No newline at end of file`.
    Note,
}

impl LineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LineKind::Context => "ctx",
            LineKind::Added => "add",
            LineKind::Removed => "del",
            LineKind::Note => "note",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line<'a> {
    pub kind: LineKind,
    /// Its number in the old file (context and removed lines).
    pub old: Option<u64>,
    /// Its number in the new file (context and added lines).
    pub new: Option<u64>,
    /// The line without its `+`/`-`/` ` mark.
    pub text: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk<'a> {
    /// The `@@ -a,b +c,d @@ …` line.
    pub header: &'a str,
    pub lines: Vec<Line<'a>>,
}

/// The start of one side of a hunk header (`-12,3` → 12).
fn start(range: &str) -> u64 {
    range[1..]
        .split(',')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The hunks of a file's patch (as [`super::FileDiff::patch`] holds it).
/// Lines before the first `@@` are ignored; a malformed header numbers its
/// lines from 0 rather than failing.
pub fn hunks(patch: &str) -> Vec<Hunk<'_>> {
    let mut out: Vec<Hunk<'_>> = Vec::new();
    let (mut old, mut new) = (0u64, 0u64);
    for line in patch.lines() {
        if line.starts_with("@@") {
            let mut ranges = line.split(' ').skip(1);
            old = ranges
                .next()
                .filter(|r| r.starts_with('-'))
                .map_or(0, start);
            new = ranges
                .next()
                .filter(|r| r.starts_with('+'))
                .map_or(0, start);
            out.push(Hunk {
                header: line,
                lines: Vec::new(),
            });
            continue;
        }
        let Some(h) = out.last_mut() else { continue };
        let (kind, text) = match line.as_bytes().first() {
            Some(b'+') => (LineKind::Added, &line[1..]),
            Some(b'-') => (LineKind::Removed, &line[1..]),
            Some(b'\\') => (LineKind::Note, line),
            Some(b' ') => (LineKind::Context, &line[1..]),
            _ => (LineKind::Context, line),
        };
        let (o, n) = match kind {
            LineKind::Added => (None, Some(new)),
            LineKind::Removed => (Some(old), None),
            LineKind::Context => (Some(old), Some(new)),
            LineKind::Note => (None, None),
        };
        match kind {
            LineKind::Added => new += 1,
            LineKind::Removed => old += 1,
            LineKind::Context => {
                old += 1;
                new += 1;
            }
            LineKind::Note => {}
        }
        h.lines.push(Line {
            kind,
            old: o,
            new: n,
            text,
        });
    }
    out
}
