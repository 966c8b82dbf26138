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

/// The part of a line that changed, as a byte range of its text, for each
/// line of a hunk: a run of removed lines followed by as many added lines
/// pairs them in order, and each pair's text between their common start
/// and common end is marked. `None` where nothing pairs, or where the two
/// lines share too little for a mark to help (under a fifth of the longer).
pub fn changed_spans(lines: &[Line<'_>]) -> Vec<Option<(usize, usize)>> {
    let mut spans = vec![None; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        if lines[i].kind != LineKind::Removed {
            i += 1;
            continue;
        }
        let del = i;
        while i < lines.len() && lines[i].kind == LineKind::Removed {
            i += 1;
        }
        let add = i;
        while i < lines.len() && lines[i].kind == LineKind::Added {
            i += 1;
        }
        if add - del != i - add {
            continue;
        }
        for k in 0..add - del {
            let (a, b) = (lines[del + k].text, lines[add + k].text);
            let (sa, sb) = spans_of(a, b);
            spans[del + k] = sa;
            spans[add + k] = sb;
        }
    }
    spans
}

type Span = Option<(usize, usize)>;

fn spans_of(a: &str, b: &str) -> (Span, Span) {
    let pre = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    let (ra, rb) = (&a[pre..], &b[pre..]);
    let suf: usize = ra
        .chars()
        .rev()
        .zip(rb.chars().rev())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.len_utf8())
        .sum();
    let suf = suf.min(ra.len()).min(rb.len());
    let same = pre + suf;
    if same * 5 < a.len().max(b.len()) {
        return (None, None);
    }
    let mark = |s: &str| {
        let end = s.len() - suf;
        (end > pre).then_some((pre, end))
    };
    (mark(a), mark(b))
}
