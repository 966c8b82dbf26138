use super::*;

const PATCH: &[u8] = b"diff --git a/a b/a
index 1..2 100644
--- a/a
+++ b/a
@@ -1,2 +1,2 @@
-old
+new
 same
\\ No newline at end of file
diff --git \"a/tab\\there\" \"b/tab\\there\"
new file mode 100644
index 0..3
--- /dev/null
+++ \"b/tab\\there\"
@@ -0,0 +1 @@
+diff --git looks like a header
diff --git a/bin b/bin
new file mode 100644
index 0..4
Binary files /dev/null and b/bin differ
diff --git a/x y b/z w
similarity index 100%
rename from x y
rename to z w
";

const NUMSTAT: &[u8] = b"1\t1\ta\x001\t0\ttab\there\x00-\t-\tbin\x000\t0\t\x00x y\x00z w\x00";

#[test]
fn names_come_from_the_numstat_and_status_from_the_patch() {
    let d = parse("b", "h", NUMSTAT, PATCH, false, Limits::default());
    let got: Vec<_> = d
        .files
        .iter()
        .map(|f| {
            (
                f.path.as_str(),
                f.old_path.as_deref(),
                f.status,
                f.added,
                f.removed,
                f.binary,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", None, FileStatus::Modified, 1, 1, false),
            ("tab\there", None, FileStatus::Added, 1, 0, false),
            ("bin", None, FileStatus::Added, 0, 0, true),
            ("z w", Some("x y"), FileStatus::Renamed, 0, 0, false),
        ]
    );
    assert!(d.files[0].patch.starts_with("@@ -1,2 +1,2 @@\n-old"));
    assert_eq!(
        d.files[1].patch,
        "@@ -0,0 +1 @@\n+diff --git looks like a header\n"
    );
    assert!(d.files[2].patch.is_empty() && d.files[3].patch.is_empty());
    assert!(!d.truncated);
    assert_eq!((d.added(), d.removed()), (2, 1));
}

#[test]
fn a_file_over_its_limit_is_cut_at_a_line_end() {
    let limits = Limits {
        file: 20,
        total: 1000,
    };
    let d = parse("b", "h", NUMSTAT, PATCH, false, limits);
    assert_eq!(d.files[0].patch, "@@ -1,2 +1,2 @@\n");
    assert!(d.files[0].truncated && d.truncated);
}

#[test]
fn the_total_limit_leaves_later_files_empty_and_truncated() {
    let limits = Limits {
        file: 1000,
        total: 30,
    };
    let d = parse("b", "h", NUMSTAT, PATCH, false, limits);
    assert!(d.files[1].truncated);
    assert!(d.files[1].patch.len() < 30);
}

#[test]
fn a_patch_git_stopped_early_marks_the_rest() {
    let cut = &PATCH[..60];
    let d = parse("b", "h", NUMSTAT, cut, true, Limits::default());
    assert!(d.files[0].truncated);
    assert!(d.files[3].truncated && d.files[3].patch.is_empty());
    assert_eq!(d.files[3].path, "z w");
}

#[test]
fn hunks_number_their_lines() {
    let d = parse("b", "h", NUMSTAT, PATCH, false, Limits::default());
    let h = hunks(&d.files[0].patch);
    assert_eq!(h.len(), 1);
    let lines: Vec<_> = h[0]
        .lines
        .iter()
        .map(|l| (l.kind, l.old, l.new, l.text))
        .collect();
    assert_eq!(
        lines,
        vec![
            (LineKind::Removed, Some(1), None, "old"),
            (LineKind::Added, None, Some(1), "new"),
            (LineKind::Context, Some(2), Some(2), "same"),
            (LineKind::Note, None, None, "\\ No newline at end of file"),
        ]
    );
}

#[test]
fn garbage_never_panics() {
    for raw in [&b"\0\0\t\t"[..], b"x\ty", b"1\t2\t", b"@@ -x +y @@\n+a\n"] {
        let d = parse("b", "h", raw, raw, true, Limits { file: 1, total: 1 });
        for f in &d.files {
            let _ = hunks(&f.patch);
        }
    }
    assert!(hunks("@@ -a,b +c @@\n+x\n-y\n").len() == 1);
}

#[test]
fn paired_lines_mark_what_changed() {
    let h = hunks("@@ -1,3 +1,3 @@\n-let x = 1;\n+let x = 2;\n ctx\n-a\n-b\n+c\n");
    let spans = changed_spans(&h[0].lines);
    assert_eq!(spans[0], Some((8, 9)));
    assert_eq!(spans[1], Some((8, 9)));
    assert_eq!(spans[2], None, "context");
    // Two removed, one added: not paired.
    assert_eq!(&spans[3..], &[None, None, None]);
    // Lines with little in common are not marked; a pure insertion marks
    // only the added side.
    let h = hunks("@@ -1 +1 @@\n-abcdefgh\n+zyxwvuts\n@@ -1 +1 @@\n-ab\n+a-é-b\n");
    assert_eq!(changed_spans(&h[0].lines), vec![None, None]);
    assert_eq!(changed_spans(&h[1].lines), vec![None, Some((1, 5))]);
}
