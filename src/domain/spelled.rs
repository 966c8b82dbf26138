//! Closed sets of values that lab spells one way each, in the database, the
//! API and on the command line (an AFK outcome, an issue state).

/// Declares such an enum: its `ALL` values, `as_str` (the spelling),
/// `Display`, `FromStr` (the exact spelling, or an error naming what is
/// allowed), serde as the spelling, and [`crate::validate::Choice`], so that
/// a request's value is checked by [`crate::validate::choice`].
macro_rules! spelled {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:tt) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:tt, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $crate::domain::spelled::parse(s, $what)
            }
        }

        impl $crate::validate::Choice for $name {
            const ALL: &'static [$name] = $name::ALL;
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }
    };
}

pub(super) use spelled;

use crate::validate::Choice;

/// The value spelled `s`, or an error naming it and the allowed ones:
/// "unknown outcome 'done'; allowed: pr-green, pr-opened, …".
pub(super) fn parse<T: Choice>(s: &str, what: &str) -> Result<T, String> {
    T::spelled(s).ok_or_else(|| {
        format!(
            "unknown {what} '{}'; allowed: {}",
            crate::validate::shown(s),
            T::spellings().join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::{IssueState, Outcome, OutputFormat};
    use super::*;

    /// Every value of a spelled enum: its spelling everywhere (text, JSON),
    /// read back exactly, and how a wrong one is refused.
    fn spelled_as<T>(table: &[(T, &str)], unknown: &str, refused: &str, must: &str)
    where
        T: Choice
            + std::fmt::Debug
            + PartialEq
            + std::fmt::Display
            + std::str::FromStr<Err = String>,
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        assert_eq!(T::ALL.len(), table.len());
        for (v, text) in table {
            assert_eq!((v.as_str(), v.to_string().as_str()), (*text, *text));
            assert_eq!(text.parse::<T>().as_ref(), Ok(v));
            assert_eq!(serde_json::to_value(v).unwrap(), *text);
            assert_eq!(&serde_json::from_value::<T>((*text).into()).unwrap(), v);
        }
        assert_eq!(unknown.parse::<T>(), Err(refused.to_owned()));
        let e = crate::validate::choice::<T>("f", unknown).unwrap_err();
        assert_eq!(e.message, must);
    }

    #[test]
    fn spelled_values_read_back_exactly() {
        spelled_as(
            &[
                (Outcome::PrGreen, "pr-green"),
                (Outcome::PrOpened, "pr-opened"),
                (Outcome::NeedsHuman, "needs-human"),
                (Outcome::Failed, "failed"),
                (Outcome::TimedOut, "timed-out"),
                (Outcome::OverBudget, "over-budget"),
                (Outcome::PrMerged, "pr-merged"),
                (Outcome::PrClosed, "pr-closed"),
                (Outcome::CliUnusable, "cli-unusable"),
                (Outcome::Stopped, "stopped"),
            ],
            "timed_out",
            "unknown outcome 'timed_out'; allowed: pr-green, pr-opened, needs-human, failed, timed-out, over-budget, pr-merged, pr-closed, cli-unusable, stopped",
            "must be pr-green, pr-opened, needs-human, failed, timed-out, over-budget, pr-merged, pr-closed, cli-unusable or stopped",
        );
        spelled_as(
            &[(IssueState::Open, "open"), (IssueState::Closed, "closed")],
            "Open",
            "unknown issue state 'Open'; allowed: open, closed",
            "must be open or closed",
        );
        spelled_as(
            &[(OutputFormat::Text, "text"), (OutputFormat::Raw, "raw")],
            "html\n",
            "unknown output format 'html\\n'; allowed: text, raw",
            "must be text or raw",
        );
        assert_eq!(OutputFormat::default(), OutputFormat::Text);
    }
}
