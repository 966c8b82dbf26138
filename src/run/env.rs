//! A run's environment: built from an allow-list, never inherited whole.
//!
//! lab's own environment may hold a database URL, forge tokens and anything
//! else its operator exported; an agent runs text anyone can write into an
//! issue. So a run gets only: the variables every program expects (`PATH`,
//! `HOME`, the locale, the time zone, proxies and CA bundles), the ones its
//! provider's CLI needs (an API key, its config folder), the names the
//! operator lists (`lab serve --run-env`), and the ones lab sets for it.
//! No `LAB_*` variable of lab's is ever passed on, whatever the lists say.

use std::collections::BTreeMap;

/// What every program may expect to find.
const BASE: &[&str] = &[
    "PATH",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// Whether `name` may pass from lab's environment into a run's.
fn allowed(name: &str, provider: &[&str], operator: &[String]) -> bool {
    if name.starts_with("LAB_") {
        return false;
    }
    BASE.contains(&name)
        || name.starts_with("LC_")
        || provider.contains(&name)
        || operator.iter().any(|o| o == name)
}

/// The variables of `inherited` (lab's environment) a run may have.
pub fn inherited(
    inherited: impl Iterator<Item = (String, String)>,
    provider: &[&str],
    operator: &[String],
) -> BTreeMap<String, String> {
    inherited
        .filter(|(k, _)| allowed(k, provider, operator))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        v.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn only_listed_names_pass() {
        let env = inherited(
            vars(&[
                ("PATH", "/usr/bin"),
                ("LC_ALL", "C.UTF-8"),
                ("LAB_GITHUB_TOKEN", "secret"),
                ("LAB_DATABASE_URL", "postgres://u:p@h/db"),
                ("TMUX", "/tmp/tmux-0/default,1,0"),
                ("TMUX_PANE", "%1"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
                ("ANTHROPIC_API_KEY", "sk"),
                ("MY_TOOL_HOME", "/opt/t"),
            ]),
            &["ANTHROPIC_API_KEY"],
            &["MY_TOOL_HOME".to_owned(), "LAB_GITHUB_TOKEN".to_owned()],
        );
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["ANTHROPIC_API_KEY", "LC_ALL", "MY_TOOL_HOME", "PATH"]
        );
    }
}
