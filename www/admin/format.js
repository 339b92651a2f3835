// Formatting: numbers with separators, dollars, durations, local
// date-times and "3 min ago", state names as words.
import { el } from "./dom.js";

/** A day and an hour in milliseconds: the periods the views count in. */
export const DAY_MS = 86_400_000;
export const HOUR_MS = 3_600_000;

const integer = new Intl.NumberFormat();
export const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
// In tables: no year, to keep the columns narrow (the full date is the cell's title).
export const shortDateTime = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });

/** @param {number | null | undefined} n */
export const fmtNumber = (n) => (n === undefined || n === null ? "—" : integer.format(n));

/** @param {number | null | undefined} value US dollars */
export function fmtUsd(value) {
  if (value === undefined || value === null) return "—";
  // Small amounts keep their significant digits ($0.00042), larger ones cents.
  const options = value !== 0 && Math.abs(value) < 1 ? { maximumSignificantDigits: 3 } : { minimumFractionDigits: 2, maximumFractionDigits: 2 };
  return new Intl.NumberFormat(undefined, { style: "currency", currency: "USD", ...options }).format(value);
}

/** @param {number | null | undefined} ms */
export function fmtMs(ms) {
  if (ms === undefined || ms === null) return "—";
  return ms < 1000 ? `${integer.format(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/**
 * "12 s ago", "3 min ago", "5 h ago", "2 days ago"; "in 4 min" for the future.
 * @param {number} ms
 * @param {number} [now]
 */
export function relative(ms, now = Date.now()) {
  const seconds = Math.round((now - ms) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 5) return seconds >= 0 ? "just now" : "in a moment";
  let span;
  if (abs < 60) span = `${abs} s`;
  else if (abs < 3600) span = `${Math.round(abs / 60)} min`;
  else if (abs < 48 * 3600) span = `${Math.round(abs / 3600)} h`;
  else span = `${Math.round(abs / 86400)} days`;
  return seconds >= 0 ? `${span} ago` : `in ${span}`;
}

/**
 * A <time> with the local date-time and how long ago (kept fresh by tick());
 * `short` leaves the year out, for tables.
 * @param {number | null | undefined} ms
 * @param {{ short?: boolean }} [options]
 */
export function timeCell(ms, { short = false } = {}) {
  if (ms === undefined || ms === null) return el("span", { class: "muted" }, "—");
  const date = new Date(ms);
  return el(
    "time",
    { datetime: date.toISOString(), title: dateTime.format(date), dataset: { ms: String(ms) } },
    el("span", { class: "abs" }, (short ? shortDateTime : dateTime).format(date)),
    el("span", { class: "rel" }, relative(ms)),
  );
}

/** Brings every "… ago" on the page up to date. */
export function tick() {
  for (const time of document.querySelectorAll("time[data-ms] .rel")) {
    time.textContent = relative(Number(/** @type {HTMLElement} */ (time.parentElement).dataset.ms));
  }
}

/**
 * Whether an error class names a failure (a success's class is "none").
 * @param {string | null | undefined} errorClass
 */
export const hasCause = (errorClass) => Boolean(errorClass) && errorClass !== "none";

/**
 * `in_flight` → "in flight", `lost_race` → "lost race".
 * @param {string | null | undefined} name
 */
export const words = (name) => String(name ?? "—").replaceAll("_", " ");

/**
 * A state as a coloured badge (admin.css colours it by its class).
 * @param {string | null | undefined} state
 */
export const badge = (state) => el("span", { class: `badge ${state ?? ""}`, dataset: { state: state ?? "" } }, words(state));

/**
 * A datetime-local input's value for `ms` (local time), and back.
 * @param {string | number | null | undefined} ms
 */
export function toLocalInput(ms) {
  if (!ms) return "";
  const d = new Date(Number(ms));
  const pad = (/** @type {number} */ n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
/** @param {string} value */
export const fromLocalInput = (value) => (value ? String(new Date(value).getTime()) : "");

/**
 * Pretty JSON when `body` is JSON (an object, or a string holding JSON); the text as it is otherwise.
 * @param {unknown} body
 */
export function pretty(body) {
  if (body === undefined || body === null) return "";
  if (typeof body !== "string") return JSON.stringify(body, null, 2);
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}
