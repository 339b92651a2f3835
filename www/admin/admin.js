// The operations console: plain DOM, no framework, no build step: native
// ES modules, which index.html loads from this entry. Each view asks the
// admin API (/onejob/v1/admin/…) for its data and builds its part of the
// page with createElement and textContent: nothing the API returns is ever
// parsed as HTML.
//
// The view is chosen by the URL's hash, so links, reloads and the back
// button work:
//
//   #jobs?state=dead&tenant=dev       the jobs list and its filters (&limit=N: page size, 50)
//   #job?tenant=dev&key=K[&user=U]    one job: attempts, events, result, actions
//   #dead-letters[?tenant=dev]        dead letters grouped by cause
//   #costs[?since=86400000]           cost per tenant and per model
//   #savings[?since=…&tenant=dev]     calls avoided and what they saved, next to what was spent
//   #providers                        each provider's breaker, and the routes
//
// Any other hash is "not found". The modules, top-down: router.js (which
// view shows), views/ (one per view), api.js (the API client, answers.js its
// types), session.js (the admin key), table.js, format.js and dom.js (the
// helpers the views share); ../states.js names the job states.
import { $ } from "./dom.js";
import { tick } from "./format.js";
import { href, render, start } from "./router.js";
import { keepKey, signOut } from "./session.js";
import { showCosts, wireCosts } from "./views/costs.js";
import { showDeadLetters, wireDeadLetters } from "./views/dead-letters.js";
import { showJob } from "./views/job.js";
import { showJobs, wireJobs } from "./views/jobs.js";
import { showNotFound } from "./views/not-found.js";
import { showProviders, wireProviders } from "./views/providers.js";
import { showSavings, wireSavings } from "./views/savings.js";

const keyField = () => /** @type {HTMLInputElement} */ ($("admin-key"));

$("sign-in-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = keyField().value.trim();
  if (!key) return;
  keepKey(key);
  keyField().value = "";
  render();
});
$("sign-out").addEventListener("click", () => signOut());

// Open a job by its key (the jobs list is searched by filters, not by key).
$("open-job").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = /** @type {HTMLFormElement} */ (event.currentTarget);
  const field = (/** @type {string} */ name) => /** @type {HTMLInputElement} */ (form.elements.namedItem(name)).value.trim();
  location.hash = href("job", { tenant: field("tenant"), key: field("key"), user: field("user") });
});

wireJobs();
wireDeadLetters();
wireCosts();
wireSavings();
wireProviders();

setInterval(tick, 15_000);
await start({
  jobs: showJobs,
  job: showJob,
  "dead-letters": showDeadLetters,
  costs: showCosts,
  savings: showSavings,
  providers: showProviders,
  "not-found": showNotFound,
});
document.body.dataset.ready = "true";
