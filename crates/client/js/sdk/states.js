// The job states the SDK reads from the gateway's job view (core's
// `JobState`). The console and the demo page have their own list
// (www/states.js): the SDK ships as its own package.

/** States with a result to replay (core's `JobState::is_terminal`). */
export const FINISHED = ["completed", "dead", "interrupted", "cancelled"];
