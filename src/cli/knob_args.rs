//! Knobs on labctl's command line (issue 27): `--knob KEY=VALUE`.

/// `KEY=VALUE`: VALUE as JSON when it is JSON (`true`, `3`, `2.5`,
/// `["src/**"]`), else as text; `KEY=` is an empty text, which clears.
pub fn knob_arg(s: &str) -> Result<(String, serde_json::Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not KEY=VALUE"))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(format!("'{s}' has no key"));
    }
    let v = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_owned()));
    Ok((k.to_owned(), v))
}

/// Knobs as one line: `changeScope=surgical, writes=["src/**"]`.
pub fn knobs_line<'a, V: serde::Serialize + 'a>(
    k: impl IntoIterator<Item = (&'a String, &'a V)>,
) -> String {
    let line = k
        .into_iter()
        .map(|(k, v)| match serde_json::to_value(v).unwrap_or_default() {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    if line.is_empty() {
        "none".to_owned()
    } else {
        line
    }
}

/// The knobs `set` makes of `current` (`KEY=` takes one off), as the
/// object a replace-set sends.
pub fn merged(
    current: &crate::knob::Set,
    set: &[(String, serde_json::Value)],
) -> serde_json::Map<String, serde_json::Value> {
    let mut out: serde_json::Map<String, serde_json::Value> = current
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
        .collect();
    for (k, v) in set {
        if v.as_str().is_some_and(str::is_empty) {
            out.remove(k);
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_json_when_they_are_json() {
        assert_eq!(knob_arg("a=true").unwrap().1, serde_json::json!(true));
        assert_eq!(
            knob_arg("a=[\"src/**\"]").unwrap().1,
            serde_json::json!(["src/**"])
        );
        assert_eq!(
            knob_arg("a=surgical").unwrap().1,
            serde_json::json!("surgical")
        );
        assert!(knob_arg("=x").is_err());
        assert!(knob_arg("x").is_err());
        let cur = crate::knob::Set::from([(
            "changeScope".to_owned(),
            crate::knob::Value::Text("surgical".into()),
        )]);
        let m = merged(&cur, &[("changeScope".into(), serde_json::json!(""))]);
        assert!(m.is_empty(), "KEY= takes it off");
    }
}
