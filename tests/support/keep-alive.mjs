// The fakes the worker calls (LLMs, the mail API) keep idle keep-alive
// connections open for the whole run.
//
// Node closes an idle one after 5 s (`server.keepAliveTimeout`; about 6 s
// as measured, tests/edge/fakes.test.mjs), and a request workerd writes on
// a pooled connection just as it closes is lost before it arrives: the
// worker sees "Network connection lost", which the gateway rightly takes
// for an unknown outcome (the provider may have it), so the job attempts
// again only after UNKNOWN_LEASE_MS. A test that counts attempts then sees
// two for one provider call: outbox.test.mjs's backlog did, whenever its
// drain paused 6 s (a whole queue batch of 10 jobs at once, each attempt
// 6.0 s after the fake's last call). A test that wants a dropped connection
// asks for one ("reset", "sse-drop", tests/support/cutting-proxy.mjs).

/** Longer than any test run: an idle connection is never closed under a request. */
const IDLE_MS = 30 * 60_000;

/** `server` keeps idle connections open (its `close()` still ends them). */
export function keepIdleConnections(server) {
  server.keepAliveTimeout = IDLE_MS;
  // Node's default headersTimeout (60 s) counts only while a request's
  // headers arrive, not while the connection is idle: it stays.
  return server;
}
