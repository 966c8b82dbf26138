//! The layer order ARCHITECTURE.md states, checked on the source: a module
//! names (`crate::…`) only modules of lower layers, never one beside or
//! above it. A violation names the file, the line and the two layers.

use std::path::{Path, PathBuf};

/// Lowest first. Modules of one layer may not name each other either.
const LAYERS: &[&[&str]] = &[
    // Leaves below everything.
    &["clock", "sys"],
    // Crate-root helpers (lib.rs) and leaves.
    &[
        "provider",
        "lock",
        "to_the_end",
        "init_tls",
        "init_logging",
        "diff",
    ],
    &["validate"],
    &["knob"],
    &["domain"],
    &["usage"],
    &["settings"],
    &["repo"],
    &["resolve"],
    &["store"],
    &["auth", "issues"],
    &["run"],
    &["afk", "doctor", "notifications"],
    &["service", "fleet"],
    &["state"],
    &["http", "web"],
    &["app"],
    &["server"],
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("a dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file under `src/` belongs to (`None`: lib.rs and
/// the binaries, which may name anything).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "bin").then(|| name.to_owned())
}

/// Every `crate::name` a line names.
fn named(line: &str) -> Vec<&str> {
    line.match_indices("crate::")
        .filter(|(i, _)| *i == 0 || !is_ident(line.as_bytes()[i - 1]))
        .filter_map(|(i, m)| {
            let rest = &line[i + m.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (end > 0).then(|| &rest[..end])
        })
        .collect()
}

#[test]
fn modules_name_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(mine) = layer_of(&module) else {
            wrong.push(format!(
                "{}: module '{module}' has no layer here",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for other in named(code) {
                if other == module {
                    continue;
                }
                match layer_of(other) {
                    Some(theirs) if theirs < mine => {}
                    Some(theirs) => wrong.push(format!(
                        "{}:{}: '{module}' (layer {mine}) names crate::{other} (layer {theirs})",
                        file.display(),
                        n + 1
                    )),
                    None => wrong.push(format!(
                        "{}:{}: crate::{other} has no layer in tests/it/layers.rs",
                        file.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the layer order is broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_a_violation() {
    assert_eq!(named("use crate::http::AppState;"), vec!["http"]);
    assert_eq!(
        named("x(crate::run::log::read(p), my_crate::y)"),
        vec!["run"]
    );
    assert!(layer_of("store") < layer_of("web"));
    assert!(layer_of("http") == layer_of("web"));
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
