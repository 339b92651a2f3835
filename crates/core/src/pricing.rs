//! What tokens cost: a price table per model (`PRICES`), in US dollars per
//! million tokens, for the console's spend estimates. Counted per attempt
//! (every attempt was paid, a hedge's loser included), so per job; a
//! duplicate or a replay makes no attempt and costs nothing.

use std::collections::HashMap;

use serde::Deserialize;

use crate::reply::Usage;

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
    /// Parses `PRICES`.
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
        Ok(Self { by_model })
    }

    /// What `usage` of `model` cost, when the model has a price.
    pub fn cost_usd(&self, model: Option<&str>, usage: &Usage) -> Option<f64> {
        let price = self.by_model.get(model?)?;
        Some(
            (usage.prompt_tokens as f64 * price.input_per_mtok
                + usage.completion_tokens as f64 * price.output_per_mtok)
                / 1e6,
        )
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

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
        }
    }
}
