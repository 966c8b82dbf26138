//! A diff as HTML: the files changed with their +/- counts, then each file's
//! hunks with line numbers, in `<details>` (a large file starts closed).
//! Readable without JavaScript, on a phone too (a file's lines scroll
//! sideways on their own). No syntax colouring (see docs/benchmarks.md for
//! the budget): added and removed lines are coloured by CSS, and the part
//! of a line that changed against its pair is in `<mark>`.
//!
//! Built as one string (not a template loop): a 5 000-line diff renders in
//! well under a millisecond per hundred lines.

use std::fmt::Write;

use crate::diff::{Diff, FileDiff, LineKind, changed_spans, hunks};

/// A file with more lines than this starts closed.
const OPEN_LINES: usize = 400;
/// Past this many lines shown open, the next files start closed.
const OPEN_TOTAL: usize = 3_000;

/// Escapes text for HTML (element content and quoted attributes), with
/// askama's own escaper.
pub fn esc(out: &mut String, s: &str) {
    use askama::filters::{Escaper, Html};
    let _ = Html.write_escaped_str(out, s);
}

/// A short signature of a diff's content, so a page refreshing a live
/// run's changes can tell whether anything changed (FNV-1a).
pub fn signature(d: &Diff) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: &[u8]| {
        for &x in b {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    feed(d.head.as_bytes());
    for f in &d.files {
        feed(f.path.as_bytes());
        feed(f.patch.as_bytes());
    }
    format!("{h:016x}")
}

fn name(out: &mut String, f: &FileDiff) {
    if let Some(old) = &f.old_path {
        esc(out, old);
        out.push_str(" → ");
    }
    esc(out, &f.path);
}

fn counts(out: &mut String, added: u64, removed: u64) {
    let _ = write!(
        out,
        "<span class=\"plus\">+{added}</span> <span class=\"minus\">−{removed}</span>"
    );
}

/// The whole diff as HTML.
pub fn render(d: &Diff) -> String {
    let lines: usize = d.files.iter().map(|f| f.patch.len() / 40 + 1).sum();
    let mut out = String::with_capacity(256 + lines * 120);
    if d.files.is_empty() {
        out.push_str("<p class=\"empty\">No changes.</p>");
        return out;
    }
    let _ = write!(
        out,
        "<p class=\"diffstat\"><strong>{} file{} changed</strong> ",
        d.files.len(),
        if d.files.len() == 1 { "" } else { "s" }
    );
    counts(&mut out, d.added(), d.removed());
    if d.work_tree {
        out.push_str(" <span class=\"from\">(uncommitted and untracked files included)</span>");
    }
    out.push_str("</p>\n<ul class=\"difffiles\">");
    for (i, f) in d.files.iter().enumerate() {
        let _ = write!(out, "<li><a href=\"#file-{i}\">");
        name(&mut out, f);
        out.push_str("</a> ");
        counts(&mut out, f.added, f.removed);
        let _ = write!(
            out,
            " <span class=\"fstatus\">{}</span></li>",
            f.status.as_str()
        );
    }
    out.push_str("</ul>\n");
    let mut shown = 0usize;
    for (i, f) in d.files.iter().enumerate() {
        file(&mut out, i, f, &mut shown);
    }
    if d.truncated {
        out.push_str(
            "<p class=\"notice\">This diff is larger than lab shows: some files are cut short. \
             Read it whole with <code>git diff</code> in the repo.</p>",
        );
    }
    out
}

fn file(out: &mut String, i: usize, f: &FileDiff, shown: &mut usize) {
    let hs = hunks(&f.patch);
    let n: usize = hs.iter().map(|h| h.lines.len() + 1).sum();
    let open = n <= OPEN_LINES && *shown + n <= OPEN_TOTAL;
    if open {
        *shown += n;
    }
    let _ = write!(
        out,
        "<details class=\"dfile\" id=\"file-{i}\"{}><summary><span class=\"path\">",
        if open { " open" } else { "" }
    );
    name(out, f);
    out.push_str("</span> ");
    counts(out, f.added, f.removed);
    let _ = write!(out, " <span class=\"fstatus\">{}</span>", f.status.as_str());
    if !open {
        let _ = write!(
            out,
            " <span class=\"from\">({n} lines: open to read)</span>"
        );
    }
    out.push_str("</summary>");
    if f.binary {
        out.push_str("<p class=\"help\">Binary file.</p>");
    } else if hs.is_empty() && !f.truncated {
        out.push_str("<p class=\"help\">No change of content.</p>");
    }
    if !hs.is_empty() {
        out.push_str("<div class=\"dbody\"><div class=\"dlines\">");
        for h in &hs {
            out.push_str("<div class=\"dl hh\"><span class=\"cd\">");
            esc(out, h.header);
            out.push_str("</span></div>");
            let spans = changed_spans(&h.lines);
            for (l, span) in h.lines.iter().zip(spans) {
                let _ = write!(
                    out,
                    "<div class=\"dl {}\"><span class=\"ln\">",
                    l.kind.as_str()
                );
                if let Some(o) = l.old {
                    let _ = write!(out, "{o}");
                }
                out.push_str("</span><span class=\"ln\">");
                if let Some(n) = l.new {
                    let _ = write!(out, "{n}");
                }
                out.push_str("</span><span class=\"cd\">");
                out.push(match l.kind {
                    LineKind::Added => '+',
                    LineKind::Removed => '-',
                    _ => ' ',
                });
                match span {
                    Some((a, b)) => {
                        esc(out, &l.text[..a]);
                        out.push_str("<mark>");
                        esc(out, &l.text[a..b]);
                        out.push_str("</mark>");
                        esc(out, &l.text[b..]);
                    }
                    None => esc(out, l.text),
                }
                out.push_str("</span></div>");
            }
        }
        out.push_str("</div></div>");
    }
    if f.truncated {
        out.push_str(
            "<p class=\"notice\">Cut short: this file's diff is larger than lab shows.</p>",
        );
    }
    out.push_str("</details>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{FileStatus, Limits, parse};

    #[test]
    fn names_and_lines_are_escaped_and_large_files_fold() {
        let big: String = (0..500).map(|i| format!("+l{i}\n")).collect();
        let patch = format!(
            "diff --git a/x b/x\n@@ -1 +1 @@\n-<b>\n+<script>alert(1)</script>\n\
             diff --git a/big b/big\n@@ -0,0 +1,500 @@\n{big}"
        );
        let numstat = b"1\t1\t<img src=x onerror=alert(1)>\x00500\t0\tbig\x00";
        let d = parse(
            "b",
            "h",
            numstat,
            patch.as_bytes(),
            false,
            Limits::default(),
        );
        assert_eq!(d.files[0].status, FileStatus::Modified);
        let html = render(&d);
        assert!(
            !html.contains("<script>") && !html.contains("<img"),
            "{html}"
        );
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
        assert!(html.contains("&#60;img src=x onerror=alert(1)&#62;"));
        assert!(html.contains("<details class=\"dfile\" id=\"file-0\" open>"));
        assert!(html.contains("<details class=\"dfile\" id=\"file-1\"><summary>"));
        assert!(html.contains("2 files changed"));
        assert_ne!(
            signature(&d),
            signature(&parse(
                "b",
                "h2",
                numstat,
                patch.as_bytes(),
                false,
                Limits::default()
            ))
        );
    }
}
