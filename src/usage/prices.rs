//! The price table: USD per million tokens, per model, one dated table per
//! provider with where its numbers come from. A transcript's model id
//! (`claude-sonnet-4-5-20250929`, `gpt-5-codex`) takes the price of the
//! longest entry it starts with, the entry ending at the id's end or at a
//! `-` (`gpt-5` prices `gpt-5-codex`, never `gpt-5.5`). A model no entry
//! names has no price: its cost is unknown, never guessed.

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Input written to the prompt cache for five minutes (Anthropic).
    pub cache_write_5m: f64,
    /// Input written to the prompt cache for an hour (Anthropic).
    pub cache_write_1h: f64,
}

/// One provider's prices, as read on `checked` at `source`.
pub struct Table {
    pub provider: &'static str,
    pub checked: &'static str,
    pub source: &'static str,
    pub models: &'static [(&'static str, Price)],
}

/// Anthropic's rates: cache writes are 1.25× input (5 minutes) or 2× (an
/// hour), cache reads 0.1× input.
const fn anthropic(input: f64, output: f64) -> Price {
    Price {
        input,
        output,
        cache_read: input / 10.0,
        cache_write_5m: input * 1.25,
        cache_write_1h: input * 2.0,
    }
}

/// OpenAI's rates: cached input is billed at its own rate, nothing is billed
/// for writing the cache.
const fn openai(input: f64, cached: f64, output: f64) -> Price {
    Price {
        input,
        output,
        cache_read: cached,
        cache_write_5m: 0.0,
        cache_write_1h: 0.0,
    }
}

pub const TABLES: &[Table] = &[
    Table {
        provider: "claude-code",
        checked: "2026-12-01",
        source: "https://docs.anthropic.com/en/docs/about-claude/pricing (Opus 4/4.1, Sonnet \
                 3.7/4, Haiku 3/3.5, and the cache multipliers); Opus 4.5 to 4.8, Sonnet \
                 4.5/4.6 and Haiku 4.5 at the list prices of https://www.anthropic.com/pricing",
        models: &[
            ("claude-opus-4-20250514", anthropic(15.0, 75.0)),
            ("claude-opus-4-1", anthropic(15.0, 75.0)),
            ("claude-opus-4-5", anthropic(5.0, 25.0)),
            ("claude-opus-4-6", anthropic(5.0, 25.0)),
            ("claude-opus-4-7", anthropic(5.0, 25.0)),
            ("claude-opus-4-8", anthropic(5.0, 25.0)),
            ("claude-sonnet-4-20250514", anthropic(3.0, 15.0)),
            ("claude-sonnet-4-5", anthropic(3.0, 15.0)),
            ("claude-sonnet-4-6", anthropic(3.0, 15.0)),
            ("claude-3-7-sonnet", anthropic(3.0, 15.0)),
            ("claude-haiku-4-5", anthropic(1.0, 5.0)),
            ("claude-3-5-haiku", anthropic(0.8, 4.0)),
            (
                "claude-3-haiku",
                Price {
                    input: 0.25,
                    output: 1.25,
                    cache_read: 0.03,
                    cache_write_5m: 0.30,
                    cache_write_1h: 0.50,
                },
            ),
        ],
    },
    Table {
        provider: "codex",
        checked: "2026-12-01",
        source: "https://developers.openai.com/api/docs/pricing (gpt-5, gpt-5-codex, \
                 gpt-5-mini); the Codex rate card of the OpenAI Help Center, checked there \
                 2026-05-13 at 25 credits to the dollar (gpt-5.2 to gpt-5.5)",
        models: &[
            ("gpt-5", openai(1.25, 0.125, 10.0)),
            ("gpt-5-mini", openai(0.25, 0.025, 2.0)),
            ("gpt-5.2", openai(1.75, 0.175, 14.0)),
            ("gpt-5.3-codex", openai(1.75, 0.175, 14.0)),
            ("gpt-5.4", openai(2.5, 0.25, 15.0)),
            ("gpt-5.4-mini", openai(0.75, 0.075, 4.52)),
            ("gpt-5.5", openai(5.0, 0.5, 30.0)),
        ],
    },
];

/// The price of a model id, by longest prefix over every table.
pub fn price(model: &str) -> Option<&'static Price> {
    TABLES
        .iter()
        .flat_map(|t| t.models.iter())
        .filter(|(prefix, _)| {
            model
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, p)| p)
}

/// Tokens of one kind each, to price.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tokens {
    #[serde(default)]
    pub input: i64,
    #[serde(default)]
    pub output: i64,
    #[serde(default)]
    pub cache_read: i64,
    #[serde(default)]
    pub cache_write_5m: i64,
    #[serde(default)]
    pub cache_write_1h: i64,
}

impl Tokens {
    pub fn is_zero(&self) -> bool {
        *self == Tokens::default()
    }

    /// What these tokens cost at `p`, in billionths of a dollar.
    pub fn cost_nano(&self, p: &Price) -> i64 {
        // USD per million tokens is nano-USD per thousandth of a token.
        let at = |n: i64, usd_per_m: f64| n.saturating_mul((usd_per_m * 1000.0).round() as i64);
        at(self.input, p.input)
            .saturating_add(at(self.output, p.output))
            .saturating_add(at(self.cache_read, p.cache_read))
            .saturating_add(at(self.cache_write_5m, p.cache_write_5m))
            .saturating_add(at(self.cache_write_1h, p.cache_write_1h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_at_a_boundary_prices_a_model() {
        let input = |m: &str| price(m).map(|p| p.input);
        assert_eq!(input("claude-sonnet-4-5-20250929"), Some(3.0));
        assert_eq!(input("claude-opus-4-1-20250805"), Some(15.0));
        assert_eq!(input("claude-opus-4-5-20251101"), Some(5.0));
        assert_eq!(input("claude-opus-4-20250514"), Some(15.0));
        assert_eq!(input("gpt-5-codex"), Some(1.25));
        assert_eq!(input("gpt-5.4-mini"), Some(0.75));
        assert_eq!(input("gpt-5.5"), Some(5.0));
        // Never a guess: an id no entry names, or one that only shares a
        // prefix with an entry up to a non-boundary, has no price.
        assert_eq!(input("claude-opus-4-9"), None);
        assert_eq!(input("claude-opus-4-10"), None);
        assert_eq!(input("gpt-5.6-sol"), None);
        assert_eq!(input("gpt-6-sol"), None);
        assert_eq!(input("fable"), None);
        assert_eq!(input("<synthetic>"), None);
        assert_eq!(input(""), None);
    }

    #[test]
    fn every_table_is_dated_and_sourced() {
        for t in TABLES {
            assert!(crate::provider::get(t.provider).is_some(), "{}", t.provider);
            assert_eq!(t.checked.len(), 10, "{}", t.provider);
            assert!(t.source.starts_with("https://"), "{}", t.provider);
            for (m, p) in t.models {
                assert!(p.input > 0.0 && p.output > 0.0, "{m}");
            }
        }
    }

    #[test]
    fn a_cost_is_tokens_times_the_rate() {
        let p = price("claude-sonnet-4-5").unwrap();
        let t = Tokens {
            input: 1_000_000,
            output: 100_000,
            cache_read: 2_000_000,
            cache_write_5m: 100_000,
            cache_write_1h: 10,
        };
        // $3 + $1.5 + $0.6 + $0.375 + 10 × $6/M
        assert_eq!(t.cost_nano(p), 5_475_060_000);
        let huge = Tokens {
            output: i64::MAX,
            ..Tokens::default()
        };
        assert_eq!(huge.cost_nano(p), i64::MAX);
    }
}
