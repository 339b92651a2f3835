// Any other hash, or a job's page without its tenant or key: says so (it
// rendered a blank page, or the jobs list).
import { $ } from "../dom.js";
import { parseRoute } from "../router.js";

/** @type {import("../router.js").View} */
export function showNotFound() {
  const { name, params } = parseRoute();
  const section = $("view-not-found");
  $("not-found-text").textContent =
    name === "job"
      ? `Not found: a job's page needs its tenant and key (#job?tenant=…&key=…); "${location.hash}" has ${params.get("tenant") ? "no key" : "no tenant"}.`
      : `Not found: this console has no page "${location.hash}".`;
  section.dataset.state = "ready";
  section.dataset.hash = location.hash;
}
