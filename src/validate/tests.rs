use expect_test::{Expect, expect};

use super::*;

fn p(id: &str) -> &'static dyn Provider {
    provider::get(id).unwrap()
}

fn err<T: std::fmt::Debug>(r: Result<T, FieldError>) -> String {
    let e = r.expect_err("should be rejected");
    format!("{}: {} {:?}", e.field, e.message, e.allowed)
}

fn check(got: String, want: Expect) {
    want.assert_eq(&got);
}

#[test]
fn catalog_values_match_case_insensitively_and_store_the_catalog_casing() {
    assert_eq!(model(p("claude-code"), "model", "OPUS").unwrap(), "opus");
    assert_eq!(
        model(p("claude-code"), "model", "Sonnet[1M]").unwrap(),
        "sonnet[1m]"
    );
    assert_eq!(
        effort(p("claude-code"), "effort", "XHigh").unwrap(),
        "xhigh"
    );
    assert_eq!(
        model(p("codex"), "model", "GPT-6-SOL").unwrap(),
        "gpt-6-sol"
    );
    assert_eq!(
        option(p("claude-code"), "f", "ultracode", "TRUE").unwrap(),
        "true"
    );
    assert_eq!(
        option(
            p("claude-code"),
            "f",
            "permission_mode",
            "bypasspermissions"
        )
        .unwrap(),
        "bypassPermissions"
    );
    assert_eq!(
        option(p("codex"), "f", "approval", "On-Request").unwrap(),
        "on-request"
    );
}

#[test]
fn unknown_values_name_the_value_and_list_the_allowed_ones() {
    check(
        err(model(p("claude-code"), "model", "gpt-5.5")),
        expect![[
            r#"model: unknown model 'gpt-5.5' for provider claude-code; allowed: sonnet, opus, haiku, fable, opusplan, sonnet[1m], opus[1m], fable[1m] Some(["sonnet", "opus", "haiku", "fable", "opusplan", "sonnet[1m]", "opus[1m]", "fable[1m]"])"#
        ]],
    );
    check(
        err(effort(p("codex"), "effort", "max")),
        expect![[
            r#"effort: unknown effort 'max' for provider codex; allowed: low, medium, high, xhigh Some(["low", "medium", "high", "xhigh"])"#
        ]],
    );
    check(
        err(option(
            p("claude-code"),
            "afk_options.turbo",
            "turbo",
            "true",
        )),
        expect![[
            r#"afk_options.turbo: unknown option 'turbo' for provider claude-code; known options: ultracode, permission_mode Some(["ultracode", "permission_mode"])"#
        ]],
    );
    check(
        err(option(
            p("claude-code"),
            "afk_options.ultracode",
            "ultracode",
            "yes",
        )),
        expect![[
            r#"afk_options.ultracode: invalid value 'yes' for option 'ultracode': must be a bool; allowed: true, false Some(["true", "false"])"#
        ]],
    );
    check(
        err(option(
            p("codex"),
            "afk_options.approval",
            "approval",
            "untrusted",
        )),
        expect![[
            r#"afk_options.approval: invalid value 'untrusted' for option 'approval': must be one of the listed values; allowed: never, on-request Some(["never", "on-request"])"#
        ]],
    );
    check(
        err(provider_id("provider", "gemini").map(|p| p.as_str())),
        expect![[
            r#"provider: unknown provider 'gemini'; allowed: claude-code, codex Some(["claude-code", "codex"])"#
        ]],
    );
}

#[test]
fn echoed_values_are_bounded_and_escaped() {
    let long = "x".repeat(10_000);
    let e = model(p("codex"), "model", &long).unwrap_err();
    assert!(e.message.len() < 400, "{}", e.message.len());
    let e = model(p("codex"), "model", "a\nb\u{0}").unwrap_err();
    assert!(e.message.contains("a\\nb\\0"), "{}", e.message);
}

#[test]
fn repo_names() {
    for ok in ["lab", "my-repo", "a.b_c", "R2", "x1"] {
        assert_eq!(repo_name("name", ok).unwrap(), ok);
    }
    for bad in [
        "",
        "123",
        "-x",
        ".x",
        "a b",
        "a/b",
        "é",
        &"a".repeat(65),
        "a;b",
        "#{x}",
    ] {
        assert!(repo_name("name", bad).is_err(), "{bad:?}");
    }
}

#[test]
fn repo_paths_and_urls() {
    assert_eq!(repo_path("path", "/srv/repo/").unwrap(), "/srv/repo");
    assert_eq!(repo_path("path", "/").unwrap(), "/");
    for bad in ["", "relative", "/a\nb"] {
        assert!(repo_path("path", bad).is_err(), "{bad:?}");
    }
    for ok in [
        "https://example.com/a.git",
        "ssh://git@h/a",
        "git@github.com:o/r.git",
        "file:///srv/a",
    ] {
        assert_eq!(repo_url("url", ok).unwrap(), ok);
    }
    for bad in [
        "",
        "-uhttps://x",
        "https://",
        "ftp://x",
        "a b",
        "just-a-name",
        "--upload-pack=x",
        "http://[",
        "https://[::1",
    ] {
        assert!(repo_url("url", bad).is_err(), "{bad:?}");
    }
}

#[test]
fn branch_names_follow_git() {
    for ok in ["main", "release/1.2", "feature-x", "v1"] {
        assert_eq!(branch("b", ok).unwrap(), ok);
    }
    for bad in [
        "", "-x", "a..b", "a b", "a~1", "a^", "a:b", "x.lock", "/a", "a/", "a@{1}", "@", ".hidden",
        "a/.b",
    ] {
        assert!(branch("b", bad).is_err(), "{bad:?}");
    }
}

#[test]
fn prompts() {
    assert!(prompt("prompt", "anything ; $(x) `y` #{z}").is_ok());
    assert!(prompt("prompt", "nul\0").is_err());
    assert!(prompt("prompt", &"x".repeat(MAX_PROMPT)).is_ok());
    assert!(prompt("prompt", &"x".repeat(MAX_PROMPT + 1)).is_err());
}

#[test]
fn labels_and_ranges() {
    assert_eq!(label("l", " ready ").unwrap(), "ready");
    assert!(label("l", "a,b").is_err());
    assert!(label("l", "").is_err());
    assert_eq!(int_range("n", 5, 1, 10).unwrap(), 5);
    check(
        err(int_range("n", 0, 1, 10)),
        expect![[r#"n: must be a whole number from 1 to 10 None"#]],
    );
}

#[test]
fn only_a_path_on_this_site_is_a_local_path() {
    for ok in ["/", "/runs", "/runs/new?repo=r&x=%20", "/repos/a.b_c-d"] {
        assert!(local_path(ok), "{ok}");
    }
    for bad in [
        "",
        "runs",
        "//evil.example",
        "/\\evil.example",
        "/\t/evil.example",
        "/\nfoo",
        "/\r\nfoo",
        "/\u{7f}",
        "/ /evil.example",
        "/\u{a0}",
        "/é",
        "https://evil.example/",
    ] {
        assert!(!local_path(bad), "{bad:?}");
    }
}

#[test]
fn web_origins_are_normalised() {
    assert_eq!(
        web_origin("https://LAB.example.com:443/some/path").as_deref(),
        Some("https://lab.example.com")
    );
    assert_eq!(
        web_origin("http://127.0.0.1:7878").as_deref(),
        Some("http://127.0.0.1:7878")
    );
    for bad in ["null", "", "lab.example.com", "file:///x", "ftp://x"] {
        assert_eq!(web_origin(bad), None, "{bad}");
    }
}

/// Each case: the value, and the error (`field: message value`) or `None`.
fn table(check: impl Fn(&str) -> Result<String, FieldError>, cases: &[(&str, Option<&str>)]) {
    for (value, want) in cases {
        let got = check(value).err().map(|e| {
            format!("{}: {} {}", e.field, e.message, e.value.unwrap_or_default())
                .trim_end()
                .to_owned()
        });
        assert_eq!(got.as_deref(), *want, "{value:?}");
    }
}

#[test]
fn titles_and_bodies_of_issues_and_pull_requests() {
    const TITLE: &str = "title: must be one line of 1 to 256 characters";
    let long = "é".repeat(257);
    table(
        |v| title("title", v),
        &[
            ("Fix the login", None),
            ("  padded  ", None),
            (&"é".repeat(256), None),
            ("", Some(TITLE)),
            ("   ", Some(TITLE)),
            ("two\nlines", Some(TITLE)),
            ("nul\0", Some(TITLE)),
            (&long, Some(TITLE)),
        ],
    );
    assert_eq!(title("title", "  padded  ").unwrap(), "padded");
    const BODY: &str = "body: must be at most 64 KiB of text";
    let big = "x".repeat(64 * 1024 + 1);
    table(
        |v| text("body", v),
        &[
            ("", None),
            ("lines\nand\ttabs", None),
            (&"x".repeat(64 * 1024), None),
            (&big, Some(BODY)),
            ("nul\0", Some(BODY)),
        ],
    );
    assert_eq!(
        title_and_body(" T ", "b\n").unwrap(),
        ("T".to_owned(), "b\n".to_owned())
    );
    let both = title_and_body("", "\0").unwrap_err();
    assert_eq!(
        both.to_string(),
        "title: must be one line of 1 to 256 characters; body: must be at most 64 KiB of text"
    );
}

#[test]
fn forge_settings() {
    table(
        |v| forge_url("forge_url", v),
        &[
            ("https://git.example.com", None),
            ("http://localhost:3000", None),
            ("https://a", None),
            (
                "https://",
                Some(
                    "forge_url: must be an http(s) URL with a host, without spaces, a query or a fragment https://",
                ),
            ),
            (
                "ftp://git.example.com",
                Some(
                    "forge_url: must be an http(s) URL with a host, without spaces, a query or a fragment ftp://git.example.com",
                ),
            ),
            (
                "https://a b",
                Some(
                    "forge_url: must be an http(s) URL with a host, without spaces, a query or a fragment https://a b",
                ),
            ),
            (
                "https://a\n",
                Some(
                    "forge_url: must be an http(s) URL with a host, without spaces, a query or a fragment https://a\\n",
                ),
            ),
        ],
    );
    table(
        |v| forge_repo("forge_repo", v),
        &[
            ("team/web", None),
            ("o.r-g_1/n.a-m_e", None),
            ("team", Some("forge_repo: must be owner/name team")),
            ("/web", Some("forge_repo: must be owner/name /web")),
            ("team/", Some("forge_repo: must be owner/name team/")),
            ("a/b/c", Some("forge_repo: must be owner/name a/b/c")),
            ("a b/c", Some("forge_repo: must be owner/name a b/c")),
            ("é/x", Some("forge_repo: must be owner/name é/x")),
        ],
    );
    const TOKEN: &str =
        "forge_token: must be at most 512 printable ASCII characters, without spaces";
    let long = "t".repeat(513);
    table(
        |v| forge_token("forge_token", v),
        &[
            ("ghp_abc123", None),
            (&"t".repeat(512), None),
            (&long, Some(TOKEN)),
            ("two words", Some(TOKEN)),
            ("line\n", Some(TOKEN)),
        ],
    );
    // The token is a secret: its error does not carry it.
    assert_eq!(forge_token("forge_token", "a b").unwrap_err().value, None);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    One,
    Two,
    Three,
}

impl Choice for Count {
    const ALL: &'static [Self] = &[Count::One, Count::Two, Count::Three];
    fn as_str(self) -> &'static str {
        match self {
            Count::One => "one",
            Count::Two => "two",
            Count::Three => "three",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Alone;

impl Choice for Alone {
    const ALL: &'static [Self] = &[Alone];
    fn as_str(self) -> &'static str {
        "alone"
    }
}

#[test]
fn choices_are_spelled_exactly_and_name_what_is_allowed() {
    for (value, want) in [
        ("one", Ok(Count::One)),
        ("three", Ok(Count::Three)),
        ("One", Err("must be one, two or three")),
        ("", Err("must be one, two or three")),
        (" two", Err("must be one, two or three")),
    ] {
        let got = choice::<Count>("n", value).map_err(|e| {
            assert_eq!((e.field.as_str(), e.value.as_deref()), ("n", Some(value)));
            e.message
        });
        assert_eq!(got, want.map_err(str::to_owned), "{value:?}");
    }
    check(
        err(choice::<Alone>("a", "x\ny")),
        expect![[r#"a: must be alone None"#]],
    );
    assert_eq!(
        choice::<Alone>("a", "x\ny").unwrap_err().value.as_deref(),
        Some("x\\ny")
    );
}

#[test]
fn run_env_names() {
    assert_eq!(run_env_name("n", "MY_VAR").unwrap(), "MY_VAR");
    for bad in ["", "1X", "A-B", "LAB_TOKEN", "TMUX", "TMUX_PANE", "A B"] {
        assert!(run_env_name("n", bad).is_err(), "{bad:?}");
    }
}
