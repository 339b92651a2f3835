// The job states, as the gateway names them (core's `JobState`), for the
// pages this folder serves: the operations console and the demo page. Each
// name is written once here. (The SDK ships as its own package and keeps
// its own list, crates/client/js/sdk/states.js: it reads only FINISHED.)

/** An attempt runs, or another is due (the last one failed transiently): pages following a job keep looking. */
export const MOVING = /** @type {const} */ (["pending", "in_flight", "failed"]);

/** A final outcome, replayed to whoever asks with the key (core's `JobState::is_terminal`). */
export const FINISHED = /** @type {const} */ (["completed", "dead", "interrupted", "cancelled"]);

/**
 * No attempt runs or is about to: finished, or the last attempt's outcome
 * unknown (no new attempt before its lease ends; then a caller's request,
 * the queue or an operator settles it). Pages following a job stop.
 */
export const AT_REST = /** @type {const} */ (["unknown", ...FINISHED]);

/** Every state, in the order a job meets them. */
export const JOB_STATES = /** @type {const} */ ([...MOVING, ...AT_REST]);

/** @typedef {typeof JOB_STATES[number]} JobState */

/** @param {string | null | undefined} state */
export const isMoving = (state) => /** @type {readonly (string | null | undefined)[]} */ (MOVING).includes(state);

/** @param {string | null | undefined} state */
export const isAtRest = (state) => /** @type {readonly (string | null | undefined)[]} */ (AT_REST).includes(state);
