// A fake mail API over real HTTP: the receiver of a job type's `webhook`
// effect (the triage type's `email`). It records every POST, checks its
// signature, and answers a receipt query, so a test counts what really
// arrived. Like fake-llm, the worker reaches it over the network exactly as
// it would reach a real mail provider.
//
//   const mail = await startFakeMail({ secret: "…" });
//   // MAIL_URL = `${mail.url}/send`, MAIL_RECEIPT_URL = `${mail.url}/receipts`
//   mail.deliveries()             // every POST /send: [{ at, idempotencyKey, body, raw, headers, signatureValid, status, path }]
//   mail.delivered(deliveryId)    // the accepted (2xx) ones of that Idempotency-Key
//   mail.receiptQueries(deliveryId) // GET /receipts/{id} asked about it: [{ at, found }]
//
// `POST /send` answers 202 `{ id }`. Unlike real mail APIs, it does NOT
// deduplicate by Idempotency-Key unless started with `{ dedup: true }`:
// every POST is counted and accepted, so a count of 1 proves onejob sent
// once. `GET /receipts/{id}` (the id URI-encoded) answers 200
// `{ id, received_ms }` if a POST with that Idempotency-Key was accepted,
// else 404 `{ error }`.
//
// Faults, in this order: `failAlways(status = 503)` until `heal()`; then
// the queue of `failNext(n, status = 503)` and `hangNext(n)` (never
// answers), consumed POST by POST in the order they were asked for. A failed
// or hung POST is recorded (status, or `hung: true`) but never counts as
// delivered, and has no receipt.
import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";

import { keepIdleConnections } from "./keep-alive.mjs";

export const FAKE_MAIL_SECRET = "mail-signing-secret-for-tests";

/** `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`: what OneJob-Signature must be. */
export const mailSignature = (secret, timestamp, raw) =>
  `sha256=${createHmac("sha256", secret).update(`${timestamp}.${raw}`).digest("hex")}`;

export async function startFakeMail({ secret = FAKE_MAIL_SECRET, dedup = false } = {}) {
  const deliveries = [];
  const receiptQueries = [];
  /** Pending one-off faults: a status number, or "hang". */
  const faults = [];
  let alwaysStatus = null;
  const hanging = new Set();
  /** Accepted ids by Idempotency-Key: { id, received_ms }. */
  const accepted = new Map();
  let nextId = 1;

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://fake-mail");
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const raw = Buffer.concat(chunks).toString("utf8");

    if (req.method === "GET" && url.pathname.startsWith("/receipts/")) {
      const id = decodeURIComponent(url.pathname.slice("/receipts/".length));
      const receipt = accepted.get(id);
      receiptQueries.push({ at: Date.now(), id, found: Boolean(receipt) });
      if (!receipt) return send(res, 404, { error: `no delivery ${id}` });
      return send(res, 200, { id, received_ms: receipt.received_ms });
    }
    if (req.method !== "POST" || url.pathname !== "/send") return send(res, 404, { error: "not found" });

    const idempotencyKey = req.headers["idempotency-key"] ?? null;
    const delivery = {
      at: Date.now(),
      path: url.pathname,
      idempotencyKey,
      body: parse(raw),
      raw,
      headers: req.headers,
      signatureValid: signatureValid(req.headers, raw),
      status: null,
    };
    deliveries.push(delivery);

    const fault = alwaysStatus ?? faults.shift();
    if (fault === "hang") {
      delivery.hung = true;
      hanging.add(res);
      return; // never answer
    }
    if (fault !== undefined) {
      delivery.status = fault;
      return send(res, fault, { error: `fake mail status ${fault}` });
    }
    let receipt = dedup && idempotencyKey !== null ? accepted.get(idempotencyKey) : undefined;
    if (!receipt) {
      receipt = { id: `mail_${nextId++}`, received_ms: delivery.at };
      if (idempotencyKey !== null && !accepted.has(idempotencyKey)) accepted.set(idempotencyKey, receipt);
    }
    delivery.status = 202;
    delivery.id = receipt.id;
    return send(res, 202, { id: receipt.id });
  });

  function signatureValid(headers, raw) {
    const given = headers["onejob-signature"];
    const timestamp = headers["onejob-timestamp"];
    if (typeof given !== "string" || typeof timestamp !== "string") return false;
    const expected = Buffer.from(mailSignature(secret, timestamp, raw));
    const actual = Buffer.from(given);
    return expected.length === actual.length && timingSafeEqual(expected, actual);
  }

  keepIdleConnections(server);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  const ok = (d) => d.status !== null && d.status >= 200 && d.status < 300;
  return {
    port,
    /** The server's origin: POST `${url}/send`, GET `${url}/receipts/{id}`. */
    url: `http://127.0.0.1:${port}`,
    secret,
    /** The next `n` POSTs answer `status` (503 unless told). */
    failNext(n, status = 503) {
      for (let i = 0; i < n; i++) faults.push(status);
    },
    /** Every POST answers `status` until `heal()`. */
    failAlways(status = 503) {
      alwaysStatus = status;
    },
    /** Ends `failAlways` (and drops pending `failNext`/`hangNext` faults). */
    heal() {
      alwaysStatus = null;
      faults.length = 0;
    },
    /** The next `n` POSTs are never answered. */
    hangNext(n) {
      for (let i = 0; i < n; i++) faults.push("hang");
    },
    /** Every POST /send, whatever its answer, oldest first. */
    deliveries() {
      return [...deliveries];
    },
    /** The accepted (2xx) POSTs whose Idempotency-Key is `deliveryId`. */
    delivered(deliveryId) {
      return deliveries.filter((d) => d.idempotencyKey === deliveryId && ok(d));
    },
    /** The receipt queries (GET /receipts/{id}) about `deliveryId`, or all of them. */
    receiptQueries(deliveryId) {
      return receiptQueries.filter((q) => deliveryId === undefined || q.id === deliveryId);
    },
    async close() {
      for (const res of hanging) res.socket?.destroy();
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function parse(raw) {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
