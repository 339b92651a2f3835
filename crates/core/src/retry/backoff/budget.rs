//! A retry budget: the AWS SDKs' retry quota, as a token bucket.
//!
//! Backoff spaces retries out; it does not stop them. When an upstream is
//! down, every caller retrying 3 times quadruples its load. The budget makes
//! retries *earned*: each costs tokens, each success pays one back, and when
//! the bucket is empty failures surface at once instead of piling on.

use std::fmt;

/// The costs and size of a [`RetryBudget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    capacity: u32,
    retry_cost: u32,
    timeout_retry_cost: u32,
    success_refund: u32,
}

impl Default for BudgetConfig {
    /// AWS SDK standard mode: 500 tokens, 5 per retry, 10 per retry after a
    /// timeout, 1 back per success.
    fn default() -> Self {
        Self { capacity: 500, retry_cost: 5, timeout_retry_cost: 10, success_refund: 1 }
    }
}

/// Why a [`BudgetConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetError {
    /// A retry must cost at least one token, or the budget limits nothing.
    FreeRetries,
    /// A single retry costs more than the whole bucket holds.
    CostAboveCapacity {
        /// The larger of the two retry costs.
        cost: u32,
        /// The bucket's size.
        capacity: u32,
    },
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FreeRetries => f.write_str("a retry must cost at least one token"),
            Self::CostAboveCapacity { cost, capacity } => {
                write!(f, "a retry costs {cost} tokens but the budget holds only {capacity}")
            }
        }
    }
}

impl std::error::Error for BudgetError {}

impl BudgetConfig {
    /// A validated configuration.
    pub fn new(
        capacity: u32,
        retry_cost: u32,
        timeout_retry_cost: u32,
        success_refund: u32,
    ) -> Result<Self, BudgetError> {
        if retry_cost == 0 || timeout_retry_cost == 0 {
            return Err(BudgetError::FreeRetries);
        }
        let cost = retry_cost.max(timeout_retry_cost);
        if cost > capacity {
            return Err(BudgetError::CostAboveCapacity { cost, capacity });
        }
        Ok(Self { capacity, retry_cost, timeout_retry_cost, success_refund })
    }
}

/// What kind of failure a retry follows; timeouts cost more because they
/// mean the upstream is slow as well as failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryCause {
    /// Any retryable error other than a timeout.
    Error,
    /// A timeout (before the request was sent, or a 408).
    Timeout,
}

/// A token bucket of retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryBudget {
    config: BudgetConfig,
    tokens: u32,
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new(BudgetConfig::default())
    }
}

impl RetryBudget {
    /// A full bucket.
    pub fn new(config: BudgetConfig) -> Self {
        Self { tokens: config.capacity, config }
    }

    /// Tokens left.
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    /// Takes the cost of one retry; `false` (and nothing taken) when the
    /// bucket cannot pay, meaning: do not retry, surface the error.
    pub fn try_withdraw(&mut self, cause: RetryCause) -> bool {
        let cost = match cause {
            RetryCause::Error => self.config.retry_cost,
            RetryCause::Timeout => self.config.timeout_retry_cost,
        };
        match self.tokens.checked_sub(cost) {
            Some(left) => {
                self.tokens = left;
                true
            }
            None => false,
        }
    }

    /// Pays back after a success, up to the capacity.
    pub fn on_success(&mut self) {
        self.tokens = self.tokens.saturating_add(self.config.success_refund).min(self.config.capacity);
    }
}

/// Retry budgets, one per tenant, so one tenant whose requests keep
/// failing cannot spend every tenant's retries; bounded: past `max`
/// tenants the least recently used one's budget is dropped (it starts full
/// again, which errs on the side of retrying).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantBudgets {
    /// Most recently used last.
    budgets: Vec<(String, RetryBudget)>,
    max: usize,
}

impl TenantBudgets {
    /// No budget yet, at most `max` (at least one) kept.
    pub const fn new(max: usize) -> Self {
        TenantBudgets { budgets: Vec::new(), max }
    }

    /// `tenant`'s budget (a full one for a tenant not kept), now the most
    /// recently used.
    pub fn of(&mut self, tenant: &str) -> &mut RetryBudget {
        let entry = match self.budgets.iter().position(|(t, _)| t == tenant) {
            Some(index) => self.budgets.remove(index),
            None => (tenant.to_owned(), RetryBudget::default()),
        };
        self.budgets.push(entry);
        if self.budgets.len() > self.max.max(1) {
            self.budgets.remove(0);
        }
        let last = self.budgets.len() - 1;
        &mut self.budgets[last].1
    }

    /// How many budgets are kept.
    pub fn len(&self) -> usize {
        self.budgets.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.budgets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn aws_defaults_allow_100_error_retries_or_50_timeout_retries() {
        let mut budget = RetryBudget::default();
        let mut granted = 0;
        while budget.try_withdraw(RetryCause::Error) {
            granted += 1;
        }
        assert_eq!(granted, 100);
        assert_eq!(budget.tokens(), 0);

        let mut budget = RetryBudget::default();
        let mut granted = 0;
        while budget.try_withdraw(RetryCause::Timeout) {
            granted += 1;
        }
        assert_eq!(granted, 50);
    }

    #[test]
    fn successes_refill_up_to_capacity() {
        let config = BudgetConfig::new(10, 5, 10, 1).unwrap();
        let mut budget = RetryBudget::new(config);
        assert!(budget.try_withdraw(RetryCause::Error));
        assert!(budget.try_withdraw(RetryCause::Error));
        assert!(!budget.try_withdraw(RetryCause::Error));
        for _ in 0..4 {
            budget.on_success();
        }
        assert!(!budget.try_withdraw(RetryCause::Error), "4 tokens cannot pay 5");
        budget.on_success();
        assert!(budget.try_withdraw(RetryCause::Error));
        for _ in 0..100 {
            budget.on_success();
        }
        assert_eq!(budget.tokens(), 10);
    }

    #[test]
    fn config_is_validated() {
        assert_eq!(BudgetConfig::new(10, 0, 1, 1), Err(BudgetError::FreeRetries));
        assert_eq!(BudgetConfig::new(5, 5, 10, 1), Err(BudgetError::CostAboveCapacity { cost: 10, capacity: 5 }));
    }

    #[test]
    fn each_tenant_spends_its_own_budget() {
        let mut budgets = TenantBudgets::new(8);
        while budgets.of("noisy").try_withdraw(RetryCause::Error) {}
        assert!(!budgets.of("noisy").try_withdraw(RetryCause::Error));
        assert!(budgets.of("quiet").try_withdraw(RetryCause::Error), "another tenant still retries");
        assert_eq!(budgets.len(), 2);
    }

    #[test]
    fn past_the_bound_the_least_recently_used_budget_is_dropped_and_starts_full() {
        let mut budgets = TenantBudgets::new(2);
        assert!(budgets.is_empty());
        budgets.of("a").try_withdraw(RetryCause::Error);
        budgets.of("b").try_withdraw(RetryCause::Error);
        // Using "a" makes "b" the least recently used: "c" drops it.
        let a_left = budgets.of("a").tokens();
        budgets.of("c");
        assert_eq!(budgets.len(), 2);
        assert_eq!(budgets.of("a").tokens(), a_left, "kept");
        assert_eq!(budgets.of("b").tokens(), RetryBudget::default().tokens(), "dropped, full again");
    }
}
