//! What a run's agent used, as its CLI's own transcript tells it.

/// Tokens, turns and cost of one run. `input_tokens` is the input not
/// served from a cache (Claude Code's `input_tokens`; Codex's input minus
/// its cached input), so the four token counts add up to what was sent and
/// received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Input read from the provider's prompt cache.
    pub cache_read_tokens: i64,
    /// Input written to the prompt cache (Claude Code; Codex reports none).
    pub cache_creation_tokens: i64,
    /// Prompts a person or lab gave the agent.
    pub turns: i64,
    /// The cost of the priced tokens, in billionths of a dollar; `None` only
    /// for a run read before lab counted unpriced tokens apart.
    pub cost_nano_usd: Option<i64>,
    /// Tokens of models lab has no price for, which the cost leaves out.
    pub unpriced_tokens: i64,
}

impl Usage {
    /// Every token counted.
    pub fn tokens(&self) -> i64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_creation_tokens)
    }

    /// The cost in dollars.
    pub fn cost_usd(&self) -> Option<f64> {
        self.cost_nano_usd.map(nano_to_usd)
    }
}

/// Billionths of a dollar as dollars.
pub fn nano_to_usd(nano: i64) -> f64 {
    nano as f64 / 1e9
}

/// A token count the way lab shows it: `812`, `45.2k`, `3.1M`.
pub fn compact_tokens(n: i64) -> String {
    match n {
        ..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// A cost the way lab shows it: `$0.42`, or `?` when unknown.
pub fn compact_cost(usd: Option<f64>) -> String {
    match usd {
        Some(c) => format!("${c:.2}"),
        None => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_compactly() {
        assert_eq!(compact_tokens(812), "812");
        assert_eq!(compact_tokens(45_210), "45.2k");
        assert_eq!(compact_tokens(3_120_000), "3.1M");
        assert_eq!(compact_cost(Some(0.4249)), "$0.42");
        assert_eq!(compact_cost(None), "?");
        let u = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_tokens: 3,
            cache_creation_tokens: 4,
            turns: 1,
            cost_nano_usd: Some(1_500_000_000),
            unpriced_tokens: 0,
        };
        assert_eq!(u.tokens(), 10);
        assert_eq!(u.cost_usd(), Some(1.5));
    }
}
