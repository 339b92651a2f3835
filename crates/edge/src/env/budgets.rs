//! Retry budgets, one per tenant, so one tenant whose requests keep failing
//! cannot spend every tenant's retries. Kept per isolate and bounded: past
//! [`MAX_TENANTS`] the least recently used tenant's budget is dropped (the
//! core's [`TenantBudgets`]).

use std::cell::RefCell;

use onejob_core::retry::backoff::budget::{RetryBudget, TenantBudgets};

/// Most budgets an isolate keeps.
pub const MAX_TENANTS: usize = 1024;

thread_local! {
    static BUDGETS: RefCell<TenantBudgets> = const { RefCell::new(TenantBudgets::new(MAX_TENANTS)) };
}

/// Runs `f` with `tenant`'s budget.
pub fn with_budget<T>(tenant: &str, f: impl FnOnce(&mut RetryBudget) -> T) -> T {
    BUDGETS.with(|budgets| f(budgets.borrow_mut().of(tenant)))
}
