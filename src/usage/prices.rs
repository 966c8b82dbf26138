//! The price table: USD per million tokens, per model, one dated table per
//! provider with where its numbers come from. A transcript's model id
//! (`claude-sonnet-4-5-20250929`, `gpt-5-codex`) takes the price of the
//! longest entry it starts with, where what follows is nothing or a date
//! (`claude-opus-4-1` never prices `claude-opus-4-10`, nor `gpt-5`
//! `gpt-5.5`). A model no entry names has no price: its cost is unknown,
//! never guessed.
//!
//! Standard rates only: Claude Code's "fast" mode and US-only inference
//! (`inference_geo: "us"`, 1.1×) cost more than the table says.

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

/// A price of Anthropic's: input, output, 5-minute and 1-hour cache
/// writes, cache reads.
const fn anthropic(input: f64, output: f64, write_5m: f64, write_1h: f64, read: f64) -> Price {
    Price {
        input,
        output,
        cache_read: read,
        cache_write_5m: write_5m,
        cache_write_1h: write_1h,
    }
}

// The pricing tiers of Claude Code 2.1.332's model catalog.
const TIER_2_10: Price = anthropic(2.0, 10.0, 2.5, 4.0, 0.2);
const TIER_2_10_READ_0_10: Price = anthropic(2.0, 10.0, 2.5, 4.0, 0.1);
const TIER_3_15: Price = anthropic(3.0, 15.0, 3.75, 6.0, 0.3);
const TIER_4_20_READ_0_20: Price = anthropic(4.0, 20.0, 5.0, 8.0, 0.2);
const TIER_5_25: Price = anthropic(5.0, 25.0, 6.25, 10.0, 0.5);
const TIER_8_40_READ_0_20: Price = anthropic(8.0, 40.0, 10.0, 16.0, 0.2);
const TIER_10_50: Price = anthropic(10.0, 50.0, 12.5, 20.0, 1.0);
const TIER_10_50_READ_0_25: Price = anthropic(10.0, 50.0, 12.5, 20.0, 0.25);
const TIER_15_75: Price = anthropic(15.0, 75.0, 18.75, 30.0, 1.5);
const HAIKU_35: Price = anthropic(0.8, 4.0, 1.0, 1.6, 0.08);
const HAIKU_45: Price = anthropic(1.0, 5.0, 1.25, 2.0, 0.1);

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
        source: "https://docs.anthropic.com/en/docs/about-claude/pricing, as the pinned \
                 Claude Code 2.1.332 bakes it into its model catalog (`pricing_tiers` and \
                 each model's `pricing`, read from the binary); keyed by each model's \
                 first-party id, the `message.model` of its transcripts",
        models: &[
            ("claude-3-5-haiku-20241022", HAIKU_35),
            ("claude-haiku-4-5-20251001", HAIKU_45),
            // claude-haiku-5-5 is left out: above 100k prompt tokens it
            // costs more (`long_prompt`), which a price per token cannot say.
            ("claude-3-5-sonnet-20241022", TIER_3_15),
            ("claude-3-7-sonnet-20250219", TIER_3_15),
            ("claude-sonnet-4-20250514", TIER_3_15),
            ("claude-sonnet-4-5-20250929", TIER_3_15),
            ("claude-sonnet-4-6", TIER_3_15),
            ("claude-sonnet-5", TIER_2_10),
            ("claude-sonnet-5-5", TIER_2_10_READ_0_10),
            ("claude-opus-4-20250514", TIER_15_75),
            ("claude-opus-4-1-20250805", TIER_15_75),
            ("claude-opus-4-5-20251101", TIER_5_25),
            ("claude-opus-4-6", TIER_5_25),
            ("claude-opus-4-7", TIER_5_25),
            ("claude-opus-4-8", TIER_5_25),
            ("claude-opus-5", TIER_5_25),
            ("claude-opus-5-5", TIER_4_20_READ_0_20),
            ("claude-fable-5", TIER_10_50),
            ("claude-fable-5-1", TIER_10_50_READ_0_25),
            ("claude-fable-5-2", TIER_8_40_READ_0_20),
            ("claude-mythos-5", TIER_10_50),
            ("claude-mythos-5-1", TIER_10_50_READ_0_25),
            ("claude-mythos-5-2", TIER_8_40_READ_0_20),
        ],
    },
    Table {
        provider: "codex",
        checked: "2026-12-01",
        source: "https://developers.openai.com/api/docs/pricing (gpt-5, gpt-5-codex, \
                 gpt-5-mini); the Codex rate card of the OpenAI Help Center, checked there \
                 2026-05-13 at 25 credits to the dollar (gpt-5.2 to gpt-5.5). The pinned \
                 Codex's newer models (gpt-5.6-*, gpt-6*) have no published price lab could \
                 check: their cost is unknown",
        models: &[
            ("gpt-5", openai(1.25, 0.125, 10.0)),
            ("gpt-5-codex", openai(1.25, 0.125, 10.0)),
            ("gpt-5-mini", openai(0.25, 0.025, 2.0)),
            ("gpt-5.2", openai(1.75, 0.175, 14.0)),
            ("gpt-5.3-codex", openai(1.75, 0.175, 14.0)),
            ("gpt-5.4", openai(2.5, 0.25, 15.0)),
            ("gpt-5.4-mini", openai(0.75, 0.075, 4.52)),
            ("gpt-5.5", openai(5.0, 0.5, 30.0)),
        ],
    },
];

/// The price of a model id: the longest entry that is the id, or the id
/// without a date suffix (`-20250929`, `-2025-08-07`).
pub fn price(model: &str) -> Option<&'static Price> {
    TABLES
        .iter()
        .flat_map(|t| t.models.iter())
        .filter(|(prefix, _)| {
            model
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || is_date_suffix(rest))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, p)| p)
}

/// `-` and a date of eight digits, dashes allowed between them.
fn is_date_suffix(rest: &str) -> bool {
    let Some(date) = rest.strip_prefix('-') else {
        return false;
    };
    date.chars().all(|c| c.is_ascii_digit() || c == '-')
        && date.chars().filter(char::is_ascii_digit).count() == 8
        && !date.ends_with('-')
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
    fn the_longest_prefix_before_a_date_prices_a_model() {
        let input = |m: &str| price(m).map(|p| p.input);
        assert_eq!(input("claude-sonnet-4-5-20250929"), Some(3.0));
        assert_eq!(input("claude-sonnet-5-5"), Some(2.0));
        assert_eq!(input("claude-sonnet-5-5-20261015"), Some(2.0));
        assert_eq!(input("claude-sonnet-5"), Some(2.0));
        assert_eq!(input("claude-opus-4-1-20250805"), Some(15.0));
        assert_eq!(input("claude-opus-4-5-20251101"), Some(5.0));
        assert_eq!(input("claude-opus-4-20250514"), Some(15.0));
        assert_eq!(input("claude-fable-5-2"), Some(8.0));
        assert_eq!(input("gpt-5-codex"), Some(1.25));
        assert_eq!(input("gpt-5-2025-08-07"), Some(1.25));
        assert_eq!(input("gpt-5.4-mini"), Some(0.75));
        assert_eq!(input("gpt-5.5"), Some(5.0));
        // Never a guess: an id no entry names, or one that only shares a
        // prefix with an entry, has no price.
        assert_eq!(input("claude-sonnet-5-6"), None);
        assert_eq!(input("claude-opus-4-9"), None);
        assert_eq!(input("claude-opus-4-1-0"), None);
        assert_eq!(input("claude-haiku-5-5"), None);
        assert_eq!(input("gpt-5.6-sol"), None);
        assert_eq!(input("gpt-5-pro"), None);
        assert_eq!(input("gpt-6.2-sol"), None);
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
        let p = price("claude-sonnet-4-5-20250929").unwrap();
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
