//! ARCHITECTURE.md stays true (issue 26 §6): every file or folder it names
//! exists, and every `module::item` it names is defined in the source
//! (lab's, its tests' or its examples').

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file and folder under `dir`, as paths relative to the repo.
fn walk(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let rel = p
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if p.is_dir() {
            out.push(format!("{rel}/"));
            walk(&p, out);
        } else {
            out.push(rel);
        }
    }
}

/// The text between backticks.
fn quoted(doc: &str) -> Vec<&str> {
    doc.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_path_architecture_names_exists() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut all = Vec::new();
    for d in [
        "src",
        "tests",
        "web",
        "migrations",
        "docs",
        "examples",
        ".ci",
    ] {
        walk(&root().join(d), &mut all);
    }
    let is_path = regex::Regex::new(r"^[\w./-]+(\.(rs|sql|md|sh|html|css|js|toml)|/)$").unwrap();
    let missing: Vec<&str> = quoted(&doc)
        .into_iter()
        .filter(|t| is_path.is_match(t) && !t.starts_with('/'))
        .filter(|t| {
            !(root().join(t).exists()
                || root().join("src").join(t).exists()
                || all.iter().any(|a| a.ends_with(&format!("/{t}"))))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_item_architecture_names_is_defined() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    walk(&root().join("src"), &mut files);
    walk(&root().join("tests"), &mut files);
    walk(&root().join("examples"), &mut files);
    let source: String = files
        .iter()
        .filter(|f| f.ends_with(".rs"))
        .map(|f| std::fs::read_to_string(root().join(f)).unwrap_or_default())
        .collect();
    let item = regex::Regex::new(r"^(?:\w+::)+(\w+)(?:\(\))?$").unwrap();
    let undefined: Vec<&str> = quoted(&doc)
        .into_iter()
        .filter_map(|t| {
            item.captures(t)
                .map(|c| (t, c.get(1).unwrap().as_str().to_owned()))
        })
        .filter(|(_, name)| {
            let defined = regex::Regex::new(&format!(
                r"(fn|struct|enum|trait|const|type|mod|static) {name}\b|\b{name}\s*[,{{(:]"
            ))
            .unwrap();
            !defined.is_match(&source)
        })
        .map(|(t, _)| t)
        .collect();
    assert!(
        undefined.is_empty(),
        "ARCHITECTURE.md names items the source does not define: {undefined:?}"
    );
}
