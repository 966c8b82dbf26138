//! Text a person types into a run.

use super::FieldError;

/// The most characters of text one input request carries (it reaches tmux
/// in pieces: a client's command travels in one message of about 16 KiB).
pub const MAX_INPUT: usize = 16 * 1024;

/// Text to type into a run: sent as it is, so it may hold line breaks and
/// tabs, but no other control character (Escape, Ctrl-C and the like are
/// keys: `keys`), and at most [`MAX_INPUT`] characters.
pub fn input_text(field: &str, value: &str) -> Result<String, FieldError> {
    lines_and_tabs(
        field,
        value,
        MAX_INPUT,
        " in one request",
        "text may hold line breaks and tabs, and control keys go in `keys` (Escape, C-c, …)",
    )
}

/// The most characters of a repo's check command.
pub const MAX_CHECK_COMMAND: usize = 4096;

/// A repo's check command: a shell command line lab runs in a run's
/// workspace, in the run's sandbox (exit 0 is green). Line breaks and tabs
/// are allowed, no other control character; at most
/// [`MAX_CHECK_COMMAND`] characters.
pub fn check_command(field: &str, value: &str) -> Result<String, FieldError> {
    lines_and_tabs(
        field,
        value,
        MAX_CHECK_COMMAND,
        "",
        "a check command may hold line breaks and tabs only",
    )
}

/// Text of at most `max` characters with no control character but line
/// breaks and tabs; the errors end with `where_` and `allowed`.
fn lines_and_tabs(
    field: &str,
    value: &str,
    max: usize,
    where_: &str,
    allowed: &str,
) -> Result<String, FieldError> {
    let chars = value.chars().count();
    if chars > max {
        return Err(FieldError::new(
            field,
            format!("is {chars} characters; at most {max} are allowed{where_}"),
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    {
        return Err(FieldError::new(
            field,
            format!("holds the control character {c:?}; {allowed}"),
        ));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_bounded_and_has_no_control_keys() {
        assert!(input_text("text", "yes, go on\n\tand \"; kill-server").is_ok());
        assert!(input_text("text", &"é".repeat(MAX_INPUT)).is_ok());
        let e = input_text("text", &"x".repeat(MAX_INPUT + 1)).unwrap_err();
        assert!(e.message.contains("at most 16384"), "{}", e.message);
        assert!(input_text("text", "\u{85}").is_err(), "C1 controls too");
        let e = input_text("text", "a\x1b[A").unwrap_err();
        assert!(e.message.contains("'\\u{1b}'"), "{}", e.message);
        assert!(input_text("text", "\r").is_err());
        assert!(input_text("text", "a\0").is_err());
    }

    #[test]
    fn a_check_command_is_bounded_text() {
        assert_eq!(
            check_command("c", "cargo test\n\tmake").unwrap(),
            "cargo test\n\tmake"
        );
        assert!(check_command("c", &"x".repeat(MAX_CHECK_COMMAND + 1)).is_err());
        let e = check_command("check_command", "make\r").unwrap_err();
        assert_eq!(e.field, "check_command");
    }
}
