import { configError } from "./errors.js";
import { isObject } from "./request.js";
import { IntentStore } from "./store.js";
import { MAX_TIMER_MS } from "./wait.js";

/**
 * `new OneJob(options)`: reads and checks the options; a wrong value is a `OneJobConfigError` naming the field.
 * @param {unknown} options what the app passed (`OneJobOptions`, checked here)
 * @param {(text: string, intent: string) => import("../onejob.js").Intent} read the engine's reader of a stored record
 */
export function readOptions(options, read) {
  /**
   * @param {unknown} object
   * @param {string} name
   * @returns {unknown}
   */
  const get = (object, name) => (isObject(object) ? object[name] : undefined);
  /**
   * @param {unknown} object
   * @param {string} name
   */
  const string = (object, name) => {
    const value = get(object, name);
    if (value == null) return undefined;
    if (typeof value !== "string") throw configError(`${name} must be a string`);
    return value;
  };
  /**
   * @param {unknown} object
   * @param {string} name
   * @param {number} fallback
   * @param {number} min
   */
  const number = (object, name, fallback, min) => {
    const value = get(object, name);
    if (value === undefined) return fallback;
    if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
      throw configError(`${name} must be a whole number ≥ ${min}`);
    }
    return value;
  };
  /** @type {typeof number} */
  const tokens = (object, name, fallback, min) => Math.min(number(object, name, fallback, min), 0xffffffff);
  // Longer than a host's timers can wait is as long as they can (see MAX_TIMER_MS).
  /** @type {typeof number} */
  const ms = (object, name, fallback, min) => Math.min(number(object, name, fallback, min), MAX_TIMER_MS);

  let store;
  const storage = string(options, "storage");
  if (storage === undefined || storage === "auto") store = IntentStore.local(read) ?? new IntentStore(read);
  else if (storage === "local") {
    store = IntentStore.local(read);
    if (!store) throw configError('storage "local": this runtime has no usable localStorage');
  } else if (storage === "memory") store = new IntentStore(read);
  else throw configError(`storage must be "auto", "local" or "memory", not "${storage}"`);
  const onEvent = get(options, "onEvent");
  if (onEvent != null && typeof onEvent !== "function") throw configError("onEvent must be a function");
  const retry = get(options, "retry");
  const budget = get(retry, "budget");
  return {
    endpoint: endpointOf(string(options, "endpoint")),
    token: string(options, "token"),
    store,
    onEvent: /** @type {((event: import("../index.js").OneJobEvent) => void) | undefined} */ (onEvent ?? undefined),
    retry: {
      maxAttempts: number(retry, "maxAttempts", 4, 1),
      baseMs: ms(retry, "baseMs", 500, 1),
      capMs: ms(retry, "capMs", 20_000, 1),
      retryAfterCapMs: ms(retry, "retryAfterCapMs", 60_000, 0),
      offlineWaitMs: ms(retry, "offlineWaitMs", 300_000, 0),
      budget: {
        capacity: tokens(budget, "capacity", 500, 1),
        retryCost: tokens(budget, "retryCost", 5, 1),
        timeoutRetryCost: tokens(budget, "timeoutRetryCost", 10, 1),
        successRefund: tokens(budget, "successRefund", 1, 0),
      },
    },
    // The gateway's default retention: a key is remembered as long as the gateway keeps its job.
    retentionMs: number(options, "retentionMs", 86_400_000, 1),
  };
}

/**
 * The endpoint as the URLs built under it will spell it (`new URL`'s form:
 * lower-case host, no default port), without a trailing slash; so a request
 * under it is recognised as such (polls and stream resumes go under it too).
 * @param {string | undefined} endpoint
 */
function endpointOf(endpoint) {
  if (endpoint === undefined) return undefined;
  let url;
  try {
    url = new URL(endpoint);
  } catch {
    throw configError(`endpoint must be an absolute URL ("https://gw.example.com"), not "${endpoint}"`);
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, "");
}
