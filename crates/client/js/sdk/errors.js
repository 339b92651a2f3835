/** An `Error` whose `name` lets `catch` blocks and TypeScript tell onejob's failures apart. */
export function named(name, message, ...cause) {
  const error = new Error(message);
  error.name = name;
  if (cause.length) error.cause = cause[0];
  return error;
}
export const configError = (message) => named("OneJobConfigError", `onejob: ${message}`);
