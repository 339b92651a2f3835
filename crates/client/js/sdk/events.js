/** @typedef {import("../index.js").OneJobEvent} OneJobEvent */

/**
 * Events for UIs, delivered to `onEvent` as plain objects. A throwing handler
 * is the app's bug and must not break the request: its exception is swallowed.
 */
export class Events {
  /** @param {((event: OneJobEvent) => void) | undefined} handler */
  constructor(handler) {
    this.handler = handler;
  }

  /**
   * @template {OneJobEvent["type"]} T
   * @param {T} type
   * @param {string} intent
   * @param {string} key
   * @param {Omit<Extract<OneJobEvent, { type: T }>, "type" | "intent" | "key" | "at">} fields
   */
  emit(type, intent, key, fields) {
    if (!this.handler) return;
    try {
      this.handler(/** @type {OneJobEvent} */ ({ type, intent, key, at: Date.now(), ...fields }));
    } catch {
      // See the class comment.
    }
  }

  /**
   * @param {string} intent
   * @param {string} message
   */
  warning(intent, message) {
    this.emit("warning", intent, "", { message });
  }
}
