// The baseline for `make bench`: a plain Worker that forwards a request to
// the upstream and returns its answer, with no authentication, no keys and
// no storage. onejob's overhead is measured against it.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/onejob/problems/not-found") return new Response("ready");
    const target = env.UPSTREAM.replace(/\/$/, "") + url.pathname.replace(/^\/v1/, "") + url.search;
    const headers = new Headers({ "Content-Type": request.headers.get("Content-Type") ?? "application/json" });
    const idempotencyKey = request.headers.get("Idempotency-Key");
    if (idempotencyKey) headers.set("Idempotency-Key", idempotencyKey);
    return fetch(target, { method: request.method, headers, body: request.body });
  },
};
