//! The patterns of the document against the validators: a pattern that is
//! exact accepts a value exactly when the validator does; a looser one
//! (branch) never refuses a value the validator accepts.

use regex::Regex;

use super::*;
use crate::validate;

/// Every string of up to `n` characters over `alphabet`.
fn strings(alphabet: &[&str], n: usize) -> Vec<String> {
    let mut all = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..n {
        last = last
            .iter()
            .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
            .collect();
        all.extend(last.iter().cloned());
    }
    all
}

const ODD: &[&str] = &[
    "a", "Z", "7", "-", ".", "_", "/", ":", "@", ",", " ", "\t", "\n", "\0", "\u{85}", "\u{a0}",
    "\u{3000}", "é", "~", "[", "\\", "{", "\u{1c}", "\u{7f}",
];

fn agree(pattern: &str, max_chars: Option<usize>, valid: impl Fn(&str) -> bool, values: &[String]) {
    let re = Regex::new(pattern).expect("the pattern compiles");
    for v in values {
        let by_schema = re.is_match(v) && max_chars.is_none_or(|m| v.chars().count() <= m);
        assert_eq!(by_schema, valid(v), "{pattern} on {v:?}");
    }
}

fn with_lengths(base: Vec<String>, edges: &[(&str, usize)]) -> Vec<String> {
    let mut v = base;
    for (unit, n) in edges {
        for k in [n - 1, *n, n + 1] {
            v.push(unit.repeat(k));
            v.push(format!(" {} ", unit.repeat(k)));
        }
    }
    v
}

#[test]
fn titles_match_the_validator() {
    let values = with_lengths(strings(ODD, 3), &[("x", MAX_TITLE), ("é", MAX_TITLE)]);
    agree(
        &title_pattern(),
        None,
        |v| validate::title("t", v).is_ok(),
        &values,
    );
}

#[test]
fn labels_match_the_validator() {
    let values = with_lengths(strings(ODD, 3), &[("x", MAX_LABEL)]);
    agree(
        &label_pattern(false),
        None,
        |v| validate::label("l", v).is_ok(),
        &values,
    );
    // An AFK label may also be blank (the default label).
    agree(
        &label_pattern(true),
        None,
        |v| v.trim().is_empty() || validate::label("l", v).is_ok(),
        &values,
    );
}

#[test]
fn repo_names_match_the_validator() {
    let values = with_lengths(strings(ODD, 3), &[("a", 64), ("1", 64)]);
    agree(
        REPO_NAME_PATTERN,
        Some(64),
        |v| validate::repo_name("n", v).is_ok(),
        &values,
    );
}

#[test]
fn paths_match_the_validator() {
    let values = with_lengths(strings(ODD, 3), &[("/", 4096)]);
    // `""` clears, which the schema allows and the validator never sees.
    agree(
        &repo_path_pattern(),
        Some(4096),
        |v| v.is_empty() || validate::repo_path("p", v).is_ok(),
        &values,
    );
}

/// Every clone URL the validator takes matches the pattern. The validator
/// also refuses a URL with a scheme that does not parse as one (`http://[`),
/// which a pattern cannot say: the server answers those with a 400, which
/// `.ci/schemathesis.toml` allows on the repo writes.
#[test]
fn urls_the_validator_takes_match_the_pattern() {
    let re = Regex::new(&repo_url_pattern()).unwrap();
    let mut refused_by_both = 0;
    for prefix in [
        "", "https://", "http://", "file://", "ssh://", "git://", "a@h:", "-a@h:",
    ] {
        for s in strings(ODD, 2) {
            let v = format!("{prefix}{s}");
            let valid = v.is_empty() || validate::repo_url("u", &v).is_ok();
            if valid {
                assert!(
                    re.is_match(&v),
                    "the validator takes {v:?}, the schema refuses it"
                );
            } else if !re.is_match(&v) {
                refused_by_both += 1;
            }
        }
    }
    assert!(refused_by_both > 0, "the pattern refuses nothing");
}

#[test]
fn branches_the_schema_refuses_the_validator_refuses() {
    let re = Regex::new(&branch_pattern()).unwrap();
    for v in strings(ODD, 3) {
        if !v.is_empty() && validate::branch("b", &v).is_ok() {
            assert!(re.is_match(&v), "{v:?}");
        }
    }
}

#[test]
fn knob_choices_match_the_check() {
    let k = &crate::knob::ChangeScope;
    let crate::knob::Type::Choice(words) = crate::knob::Knob::ty(k) else {
        panic!("changeScope is a choice");
    };
    let schema = serde_json::to_value(knobs::choice(words).build()).unwrap();
    let pattern = schema["pattern"].as_str().unwrap().to_owned();
    let edges = [
        "", " ", "\t", "\u{a0}", "\u{3000}", "\u{85}", "x", "\u{200b}", "-",
    ];
    let mut values = vec![String::new(), "surg".into(), "surgicalsurgical".into()];
    for w in words {
        let mixed: String = w
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect();
        for form in [w.to_string(), w.to_uppercase(), mixed] {
            for a in edges {
                for b in edges {
                    values.push(format!("{a}{form}{b}"));
                }
            }
        }
    }
    agree(
        &pattern,
        None,
        |v| crate::knob::check(k, "k", &serde_json::json!(v)).is_ok(),
        &values,
    );
}
