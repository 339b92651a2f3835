/**
 * Events for UIs, delivered to `onEvent` as plain objects. A throwing handler
 * is the app's bug and must not break the request: its exception is swallowed.
 */
export class Events {
  constructor(handler) {
    this.handler = handler;
  }

  emit(type, intent, key, fields) {
    if (!this.handler) return;
    try {
      this.handler({ type, intent, key, at: Date.now(), ...fields });
    } catch {
      // See the class comment.
    }
  }

  warning(intent, message) {
    this.emit("warning", intent, "", { message });
  }
}
