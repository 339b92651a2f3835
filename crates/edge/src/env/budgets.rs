//! Retry budgets, one per tenant, so one tenant whose requests keep failing
//! cannot spend every tenant's retries. Kept per isolate and bounded: past
//! [`MAX_TENANTS`] the least recently used tenant's budget is dropped (it
//! starts full again, which errs on the side of retrying).

use std::cell::RefCell;

use onejob_core::backoff::budget::RetryBudget;

/// Most budgets an isolate keeps.
pub const MAX_TENANTS: usize = 1024;

thread_local! {
    /// Most recently used last.
    static BUDGETS: RefCell<Vec<(String, RetryBudget)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `tenant`'s budget.
pub fn with_budget<T>(tenant: &str, f: impl FnOnce(&mut RetryBudget) -> T) -> T {
    BUDGETS.with(|budgets| {
        let mut budgets = budgets.borrow_mut();
        let entry = match budgets.iter().position(|(t, _)| t == tenant) {
            Some(index) => budgets.remove(index),
            None => (tenant.to_owned(), RetryBudget::default()),
        };
        budgets.push(entry);
        if budgets.len() > MAX_TENANTS {
            budgets.remove(0);
        }
        let last = budgets.len() - 1;
        f(&mut budgets[last].1)
    })
}
