/**
 * An `Error` whose `name` lets `catch` blocks and TypeScript tell onejob's failures apart.
 * @param {import("../index.js").OneJobErrorName} name
 * @param {string} message
 * @param {unknown[]} cause at most one: the underlying error, when there is one
 * @returns {import("../index.js").OneJobError}
 */
export function named(name, message, ...cause) {
  const error = /** @type {import("../index.js").OneJobError} */ (new Error(message));
  error.name = name;
  if (cause.length) error.cause = cause[0];
  return error;
}
/** @param {string} message */
export const configError = (message) => named("OneJobConfigError", `onejob: ${message}`);
