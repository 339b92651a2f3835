// Signing in and out. The admin key lives in sessionStorage: it is
// forgotten when the tab closes and never shared with other tabs (unlike
// localStorage), and it is sent only to this gateway's admin API.
import { $ } from "./dom.js";

const KEY_STORAGE = "onejob:admin-key";

/** The admin key of this tab, if signed in. */
export const adminKey = () => sessionStorage.getItem(KEY_STORAGE);

/** @param {string} key */
export const keepKey = (key) => sessionStorage.setItem(KEY_STORAGE, key);

/**
 * Forgets the key and shows the sign-in form, with why when there is a reason.
 * @param {string} [message]
 */
export function signOut(message) {
  sessionStorage.removeItem(KEY_STORAGE);
  showSignIn(message);
}

/** @param {string} [message] */
export function showSignIn(message) {
  $("console").hidden = true;
  $("sign-in").hidden = false;
  $("sign-out").hidden = true;
  $("who").textContent = "signed out";
  $("who").className = "pill";
  $("sign-in-error").hidden = !message;
  $("sign-in-error").textContent = message ?? "";
  $("admin-key").focus();
}

export function showSignedIn() {
  $("sign-in").hidden = true;
  $("console").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = "signed in as admin";
  $("who").className = "pill ok";
}
