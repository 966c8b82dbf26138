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
    /// Input written to the prompt cache for five minutes (Anthropic; for
    /// OpenAI, the input rate: it bills a cache write as input).
    pub cache_write_5m: f64,
    /// Input written to the prompt cache for an hour (Anthropic).
    pub cache_write_1h: f64,
    /// A dearer rate for a request whose prompt (input, cache reads and
    /// writes) passes this many tokens (claude-haiku-5-5's `long_prompt`).
    pub long: Option<(i64, &'static Price)>,
}

/// A model lab knows but has no price for, and why: its tokens are counted
/// apart (`unpriced_tokens`), never guessed at.
pub struct Unpriced {
    pub model: &'static str,
    pub why: &'static str,
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
        long: None,
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
const HAIKU_55_LONG: Price = anthropic(0.5, 2.5, 0.625, 1.0, 0.05);
const HAIKU_55: Price = Price {
    long: Some((100_000, &HAIKU_55_LONG)),
    ..anthropic(0.1, 0.5, 0.125, 0.2, 0.01)
};

/// OpenAI's rates: cached input is billed at its own rate, nothing is billed
/// for writing the cache.
const fn openai(input: f64, cached: f64, output: f64) -> Price {
    Price {
        input,
        output,
        cache_read: cached,
        cache_write_5m: input,
        cache_write_1h: input,
        long: None,
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
            // The catalog's own model names (what the clouds' aliases
            // resolve to) beside the dated first-party ids.
            ("claude-3-5-haiku", HAIKU_35),
            ("claude-haiku-4-5", HAIKU_45),
            ("claude-3-5-sonnet", TIER_3_15),
            ("claude-3-7-sonnet", TIER_3_15),
            ("claude-sonnet-4-0", TIER_3_15),
            ("claude-sonnet-4-5", TIER_3_15),
            ("claude-opus-4-0", TIER_15_75),
            ("claude-opus-4-1", TIER_15_75),
            ("claude-opus-4-5", TIER_5_25),
            ("claude-3-5-haiku-20241022", HAIKU_35),
            ("claude-haiku-4-5-20251001", HAIKU_45),
            // Above 100k prompt tokens a request costs its `long_prompt`
            // rate (priced per API message, which is one request).
            ("claude-haiku-5-5", HAIKU_55),
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
            ("gpt-5.4-mini", openai(0.75, 0.075, 4.50)),
            ("gpt-5.5", openai(5.0, 0.5, 30.0)),
        ],
    },
];

/// The pinned CLIs' models no published price was found for (checked
/// 2026-12-02): their tokens are `unpriced_tokens`. A model a CLI offers
/// must be priced or listed here (`tests/fixtures/*-models.*`, checked by
/// `every_model_the_clis_offer_is_priced_or_named`).
pub const UNPRICED: &[Unpriced] = &[
    Unpriced {
        model: "gpt-6.2-sol",
        why: "no published price (Codex 0.171.0's default)",
    },
    Unpriced {
        model: "gpt-6.2-astra",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-6.1-sol",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-6.1-terra",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-6-sol",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-6-astra",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-6-luna",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-5.6-sol",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-5.6-terra",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-5.6-luna",
        why: "no published price",
    },
    Unpriced {
        model: "gpt-daybreak-blue-latest",
        why: "no published price (hidden)",
    },
    Unpriced {
        model: "gpt-daybreak-red-latest",
        why: "no published price (hidden)",
    },
    Unpriced {
        model: "codex-auto-review",
        why: "no published price (hidden, Codex's own reviews)",
    },
];

/// A model id as Claude Code's transcripts or a cloud write it, as the
/// first-party id the table is keyed by: Bedrock's
/// `us.anthropic.claude-sonnet-4-5-20250929-v1:0` (a region prefix,
/// `anthropic.`, a `-vN[:M]` version) and Vertex's
/// `claude-sonnet-4-5@20250929` (`@` before the date) price like
/// `claude-sonnet-4-5-20250929`.
fn first_party(model: &str) -> String {
    let mut m = model;
    for region in ["us-gov.", "us.", "eu.", "apac.", "jp.", "au.", "global."] {
        if let Some(rest) = m.strip_prefix(region)
            && rest.starts_with("anthropic.")
        {
            m = rest;
            break;
        }
    }
    let m = m.strip_prefix("anthropic.").unwrap_or(m);
    let (m, date) = match m.split_once('@') {
        Some((name, date)) => (name, Some(date)),
        None => (m, None),
    };
    let m = match m.rsplit_once("-v") {
        Some((head, v))
            if !v.is_empty()
                && v.split(':')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            head
        }
        _ => m,
    };
    match date {
        Some(d) => format!("{m}-{d}"),
        None => m.to_owned(),
    }
}

/// The price of a model id: the longest entry that is the id, or the id
/// without a date suffix (`-20250929`, `-2025-08-07`); a cloud's id reads
/// as the first-party one.
pub fn price(model: &str) -> Option<&'static Price> {
    let model = first_party(model);
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

    /// Every token counted.
    pub fn total(&self) -> i64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write_5m)
            .saturating_add(self.cache_write_1h)
    }

    /// What these tokens cost at `p`, in billionths of a dollar (one
    /// request's: a prompt past `p.long`'s threshold costs that rate).
    pub fn cost_nano(&self, p: &Price) -> i64 {
        let prompt = self
            .input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write_5m)
            .saturating_add(self.cache_write_1h);
        let p = match p.long {
            Some((above, dearer)) if prompt > above => dearer,
            _ => p,
        };
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
        assert_eq!(input("claude-haiku-5-5"), Some(0.1));
        // Clouds' ids price as the first-party ones.
        assert_eq!(
            input("us.anthropic.claude-haiku-4-5-20251001-v1:0"),
            Some(1.0)
        );
        assert_eq!(input("global.anthropic.claude-sonnet-5-5"), Some(2.0));
        assert_eq!(input("anthropic.claude-opus-5-5"), Some(4.0));
        assert_eq!(input("claude-sonnet-4-5@20250929"), Some(3.0));
        assert_eq!(input("claude-3-5-sonnet-v2@20241022"), Some(3.0));
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

    /// Every model the pinned CLIs offer (their own lists, kept as
    /// fixtures) is priced, or named in `UNPRICED` with why: a new model or
    /// alias cannot go unpriced silently.
    #[test]
    fn every_model_the_clis_offer_is_priced_or_named() {
        let named = |m: &str| UNPRICED.iter().any(|u| u.model == m);
        let claude: serde_json::Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/claude-2.1.332-models.json"
        ))
        .unwrap();
        let mut ids: Vec<String> = Vec::new();
        for key in ["first_party", "bedrock", "vertex"] {
            ids.extend(
                claude[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned()),
            );
        }
        ids.extend(
            claude["aliases"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_str().unwrap().to_owned()),
        );
        assert!(ids.len() > 40, "{ids:?}");
        let codex: serde_json::Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/codex-0.171.0-models.json"
        ))
        .unwrap();
        ids.extend(
            codex["models"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["slug"].as_str().unwrap().to_owned()),
        );
        let missing: Vec<&String> = ids
            .iter()
            .filter(|m| price(m).is_none() && !named(m))
            .collect();
        assert!(
            missing.is_empty(),
            "neither priced nor named unpriced: {missing:?}"
        );
        // And lab's own catalogs: every model a run can be started with.
        for p in crate::provider::all() {
            for m in p.models() {
                let alias = m.trim_end_matches("[1m]");
                let bare = claude["aliases"][alias].as_str().unwrap_or(alias);
                let known =
                    price(bare).is_some() || named(bare) || matches!(bare, "opusplan" | "best");
                assert!(known, "{} model {m} ({bare})", p.id());
            }
        }
    }
}
