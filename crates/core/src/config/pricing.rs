//! What tokens cost: a price table per model, in US dollars per million
//! tokens, for the console's spend estimates. Counted per attempt (every
//! attempt was paid, a hedge's loser included), so per job; a duplicate or
//! a replay makes no attempt and costs nothing.
//!
//! A dated table of list prices is bundled ([`BUNDLED`], [`BUNDLED_AS_OF`]),
//! so a deployment (and `make dev`, through the demo models' pretend price)
//! shows spend without any setting. `PRICES` **merges over** it: a model it
//! names takes its price (`{"input_per_mtok": 0, "output_per_mtok": 0}`
//! makes one free), every other model keeps the bundled one.

use std::collections::HashMap;

use serde::Deserialize;

use crate::retry::reply::Usage;

/// When the bundled prices were last compared with the providers' published
/// list prices (standard tier, no batch or cache discounts).
pub const BUNDLED_AS_OF: &str = "2025-11-24";

/// The bundled table: model, input and output US dollars per million tokens.
/// A dated snapshot (`gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`) is
/// priced as its alias unless listed itself (see [`Prices::price_of`]).
pub const BUNDLED: &[(&str, f64, f64)] = &[
    // OpenAI
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4o-2024-05-13", 5.00, 15.00),
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-5", 1.25, 10.00),
    ("gpt-5-mini", 0.25, 2.00),
    ("gpt-5-nano", 0.05, 0.40),
    ("o1-mini", 1.10, 4.40),
    ("o3-mini", 1.10, 4.40),
    ("o4-mini", 1.10, 4.40),
    ("o3", 2.00, 8.00),
    // Anthropic (aliases; the dated ids fall back to them)
    ("claude-opus-4-5", 5.00, 25.00),
    ("claude-opus-4-1", 15.00, 75.00),
    ("claude-opus-4", 15.00, 75.00),
    ("claude-opus-4-0", 15.00, 75.00),
    ("claude-sonnet-4-5", 3.00, 15.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-sonnet-4-0", 3.00, 15.00),
    ("claude-3-7-sonnet", 3.00, 15.00),
    ("claude-haiku-4-5", 1.00, 5.00),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("claude-3-5-haiku-latest", 0.80, 4.00),
    // The gateway's demo provider: a pretend price (gpt-4o-mini's), so that
    // `make dev` shows a spend that is not $0.00.
    ("demo", 0.15, 0.60),
    ("demo-flaky", 0.15, 0.60),
    ("demo-slow", 0.15, 0.60),
    ("demo-timeout", 0.15, 0.60),
    ("demo-prose", 0.15, 0.60),
    ("demo-stream-drop", 0.15, 0.60),
    ("demo-stream-error", 0.15, 0.60),
];

/// A model's prices, per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt (input) tokens.
    pub input_per_mtok: f64,
    /// Per million completion (output) tokens.
    pub output_per_mtok: f64,
}

/// Prices by model name (as sent to the provider).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    by_model: HashMap<String, Price>,
    /// The models `PRICES` set (over the bundled table), sorted.
    overridden: Vec<String>,
}

/// `PRICES` is malformed (never quoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PricesError;

impl std::fmt::Display for PricesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PRICES must be a JSON object: model → {\"input_per_mtok\": n, \"output_per_mtok\": n}, n ≥ 0")
    }
}

impl Prices {
    /// The bundled table with `PRICES` (as read; `None`: unset) merged over it.
    pub fn from_var(text: Option<&str>) -> Result<Self, PricesError> {
        text.map_or_else(|| Ok(Self::bundled()), Self::bundled_with)
    }

    /// The bundled table alone ([`BUNDLED`], as of [`BUNDLED_AS_OF`]).
    pub fn bundled() -> Self {
        let by_model = BUNDLED
            .iter()
            .map(|&(model, input, output)| (model.to_owned(), Price { input_per_mtok: input, output_per_mtok: output }))
            .collect();
        Self { by_model, overridden: Vec::new() }
    }

    /// The bundled table with `PRICES` merged over it: a model `PRICES`
    /// names takes that price, the others keep the bundled one.
    pub fn bundled_with(json: &str) -> Result<Self, PricesError> {
        let overrides = Self::from_json(json)?;
        let mut prices = Self::bundled();
        let mut overridden: Vec<String> = overrides.by_model.keys().cloned().collect();
        overridden.sort();
        prices.by_model.extend(overrides.by_model);
        prices.overridden = overridden;
        Ok(prices)
    }

    /// Parses `PRICES` alone (no bundled price).
    pub fn from_json(json: &str) -> Result<Self, PricesError> {
        let by_model: HashMap<String, Price> = serde_json::from_str(json).map_err(|_| PricesError)?;
        let valid = |p: &Price| {
            p.input_per_mtok.is_finite()
                && p.output_per_mtok.is_finite()
                && p.input_per_mtok >= 0.0
                && p.output_per_mtok >= 0.0
        };
        if !by_model.values().all(valid) {
            return Err(PricesError);
        }
        Ok(Self { by_model, overridden: Vec::new() })
    }

    /// The models whose price `PRICES` set, sorted (for the console).
    pub fn overridden(&self) -> &[String] {
        &self.overridden
    }

    /// `model`'s price: its own, else (a dated snapshot such as
    /// `gpt-4o-2024-08-06` or `claude-sonnet-4-20250514`) its alias's.
    pub fn price_of(&self, model: &str) -> Option<Price> {
        self.by_model.get(model).or_else(|| self.by_model.get(undated(model)?)).copied()
    }

    /// What `usage` of `model` cost, when the model has a price.
    pub fn cost_usd(&self, model: Option<&str>, usage: &Usage) -> Option<f64> {
        let price = self.price_of(model?)?;
        Some(
            (usage.prompt_tokens as f64 * price.input_per_mtok
                + usage.completion_tokens as f64 * price.output_per_mtok)
                / 1e6,
        )
    }
}

/// `model` without a trailing snapshot date (`-YYYYMMDD` or `-YYYY-MM-DD`).
fn undated(model: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (head, tail) = model.rsplit_once('-')?;
    if tail.len() == 8 && digits(tail) {
        return Some(head);
    }
    // -YYYY-MM-DD: the last three pieces are 4, 2 and 2 digits.
    let (head, month) = head.rsplit_once('-')?;
    let (head, year) = head.rsplit_once('-')?;
    (year.len() == 4 && month.len() == 2 && tail.len() == 2 && digits(year) && digits(month) && digits(tail))
        .then_some(head)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn unset_prices_are_the_bundled_table_and_a_value_is_merged_over_it() {
        assert_eq!(Prices::from_var(None), Ok(Prices::bundled()));
        assert_eq!(Prices::from_var(Some("{}")).ok(), Prices::bundled_with("{}").ok());
        assert_eq!(Prices::from_var(Some("not json")), Err(PricesError));
    }

    const MTOK: Usage = Usage { prompt_tokens: 1_000_000, completion_tokens: 1_000_000, total_tokens: 2_000_000 };

    #[test]
    fn cost_per_million_tokens() {
        let prices = Prices::from_json(r#"{"gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}"#).unwrap();
        let usage = Usage { prompt_tokens: 1_000_000, completion_tokens: 500_000, total_tokens: 1_500_000 };
        assert_eq!(prices.cost_usd(Some("gpt-4o-mini"), &usage), Some(0.45));
        assert_eq!(prices.cost_usd(Some("other"), &usage), None);
        assert_eq!(prices.cost_usd(None, &usage), None);
    }

    #[test]
    fn malformed_prices_are_refused() {
        for bad in [r#"{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}"#, r#"{"m": {"input": 1}}"#, "[]"] {
            assert_eq!(Prices::from_json(bad), Err(PricesError), "{bad}");
            assert_eq!(Prices::bundled_with(bad), Err(PricesError), "{bad}");
        }
    }

    #[test]
    fn the_bundled_table_prices_common_models_and_the_demo() {
        let prices = Prices::bundled();
        let cost = |model: &str| prices.cost_usd(Some(model), &MTOK);
        assert_eq!(cost("gpt-4o"), Some(12.5));
        assert_eq!(cost("gpt-4o-mini"), Some(0.75));
        assert_eq!(cost("gpt-4.1"), Some(10.0));
        assert_eq!(cost("o4-mini"), Some(5.5));
        assert_eq!(cost("claude-sonnet-4-5"), Some(18.0));
        assert_eq!(cost("claude-haiku-4-5"), Some(6.0));
        assert_eq!(cost("claude-opus-4-5"), Some(30.0));
        // Every demo model the demo provider answers has a (pretend) price: `make dev` shows spend.
        for demo in
            ["demo", "demo-flaky", "demo-slow", "demo-timeout", "demo-prose", "demo-stream-drop", "demo-stream-error"]
        {
            assert!(cost(demo).is_some_and(|c| c > 0.0), "{demo}");
        }
        assert_eq!(cost("no-such-model"), None);
        assert!(prices.overridden().is_empty());
        // One row per model, every price a finite non-negative number, and a date.
        let mut names: Vec<&str> = BUNDLED.iter().map(|(m, _, _)| *m).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BUNDLED.len(), "a model listed twice");
        assert!(BUNDLED.iter().all(|&(_, i, o)| i.is_finite() && o.is_finite() && i >= 0.0 && o >= 0.0));
        assert!(
            BUNDLED_AS_OF.len() == 10 && BUNDLED_AS_OF.as_bytes()[4] == b'-' && BUNDLED_AS_OF.as_bytes()[7] == b'-'
        );
    }

    #[test]
    fn a_dated_snapshot_is_priced_as_its_alias_unless_listed() {
        let prices = Prices::bundled();
        assert_eq!(prices.price_of("gpt-4o-2024-08-06"), prices.price_of("gpt-4o"));
        assert_eq!(prices.price_of("claude-sonnet-4-20250514"), prices.price_of("claude-sonnet-4"));
        assert_eq!(prices.price_of("claude-3-5-haiku-20241022"), prices.price_of("claude-3-5-haiku"));
        // The first gpt-4o snapshot had its own (higher) price.
        assert_eq!(prices.price_of("gpt-4o-2024-05-13"), Some(Price { input_per_mtok: 5.0, output_per_mtok: 15.0 }));
        // Not a date: no fallback.
        assert_eq!(prices.price_of("gpt-4o-1234"), None);
        assert_eq!(undated("o3-mini-2025-01-31"), Some("o3-mini"));
        assert_eq!(undated("gpt-4.1"), None);
    }

    #[test]
    fn prices_merge_over_the_bundled_table() {
        let prices = Prices::bundled_with(
            r#"{"demo": {"input_per_mtok": 150, "output_per_mtok": 600},
                "gpt-4o": {"input_per_mtok": 0, "output_per_mtok": 0},
                "my-model": {"input_per_mtok": 1, "output_per_mtok": 2}}"#,
        )
        .unwrap();
        let cost = |model: &str| prices.cost_usd(Some(model), &MTOK);
        assert_eq!(cost("demo"), Some(750.0), "PRICES wins");
        assert_eq!(cost("gpt-4o"), Some(0.0), "PRICES can make a model free");
        assert_eq!(cost("gpt-4o-2024-08-06"), Some(0.0), "and its snapshots");
        assert_eq!(cost("my-model"), Some(3.0), "PRICES adds models");
        assert_eq!(cost("gpt-4o-mini"), Some(0.75), "the bundled price of a model PRICES leaves out");
        assert_eq!(prices.overridden(), ["demo", "gpt-4o", "my-model"]);
    }
}
