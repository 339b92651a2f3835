// Keys as onejob-core derives them, for tests that look at what the
// provider saw.
import { createHash, createHmac } from "node:crypto";

/** SHA-256 over length-prefixed parts, as onejob-core's digest module frames them. */
function framedSha256(parts) {
  const hash = createHash("sha256");
  for (const part of parts) {
    const bytes = Buffer.from(part, "utf8");
    const length = Buffer.alloc(8);
    length.writeBigUInt64BE(BigInt(bytes.length));
    hash.update(length).update(bytes);
  }
  return hash.digest("hex");
}

/**
 * The `Idempotency-Key` the gateway sends the provider for (tenant, key):
 * derived from the tenant-scoped storage id (core `StorageId::upstream_key`,
 * pinned there by a test), never the client's key.
 */
export function upstreamKey(key, tenant = "dev") {
  const storageId = framedSha256(["onejob/storage/v1", tenant, key]);
  return `onejob-${framedSha256(["onejob/upstream-key/v1", storageId])}`;
}

/**
 * A user token as an app's server mints it (core `token::mint`): an HS256
 * JWT over `claims` ({ tenant, sub, exp, iat?, models?, paths? }).
 */
export function mintToken(claims, secret, { alg = "HS256" } = {}) {
  const b64 = (value) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url");
  const signed = `${b64({ alg, typ: "JWT" })}.${b64(claims)}`;
  return `${signed}.${createHmac("sha256", secret).update(signed).digest("base64url")}`;
}

/** The development tenant's token secret (dev.vars.example TOKEN_SECRETS). */
export const DEV_TOKEN_SECRET = "onejob-dev-token-secret-not-for-production";
