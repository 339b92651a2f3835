/** @typedef {import("../onejob.js").Intent} Intent */
/**
 * A stored entry that was removed, and why (a warning for the app).
 * @typedef {{ intent: string, reason: string }} Dropped
 */

const PREFIX = "onejob:v1:intent:";
/** The most records kept: past it the least recently updated are dropped. */
const MAX_INTENTS = 500;
const DROPPED_FOR_ROOM = "unresolved intent dropped: the store keeps at most 500 intents (MAX_INTENTS)";

/**
 * Where intents are remembered: `localStorage` (survives reloads) or memory.
 * Entries live under `onejob:v1:intent:<intent>` as the engine's JSON; one
 * that does not read back is removed and reported as a warning.
 */
export class IntentStore {
  /**
   * `read(text, intent)`: the engine's reader of a stored record (throws when unreadable).
   * @param {(text: string, intent: string) => Intent} read
   * @param {Storage} [storage]
   */
  constructor(read, storage) {
    this.read = read;
    this.storage = storage;
    /** @type {"local" | "memory"} */
    this.kind = storage ? "local" : "memory";
    /** @type {Map<string, string>} */
    this.memory = new Map();
  }

  /**
   * `localStorage`, if present and usable (it throws in some private modes).
   * @param {(text: string, intent: string) => Intent} read
   */
  static local(read) {
    try {
      const storage = globalThis.localStorage;
      if (!storage) return undefined;
      storage.setItem(`${PREFIX}__probe`, "1");
      storage.removeItem(`${PREFIX}__probe`);
      return new IntentStore(read, storage);
    } catch {
      return undefined;
    }
  }

  /**
   * @param {string} name
   * @returns {string | undefined}
   */
  get(name) {
    return this.storage ? this.storage.getItem(name) ?? undefined : this.memory.get(name);
  }

  /** The storage names of every entry. */
  names() {
    if (!this.storage) return [...this.memory.keys()];
    const names = [];
    for (let i = 0; i < this.storage.length; i++) {
      const name = this.storage.key(i);
      if (name?.startsWith(PREFIX)) names.push(name);
    }
    return names;
  }

  /**
   * The record of `intent`, or undefined; throws `{intent, reason}` (after removing it) when unreadable.
   * @param {string} intent
   * @returns {Intent | undefined}
   */
  load(intent) {
    const text = this.get(PREFIX + intent);
    if (text === undefined) return undefined;
    try {
      return this.read(text, intent);
    } catch (error) {
      this.remove(intent);
      // The engine's reader throws an Error saying why.
      throw { intent, reason: /** @type {Error} */ (error).message };
    }
  }

  /**
   * Saves a record, first making room for a new one (`isNew`: the caller
   * knows whether the store lacks it; else it is looked up); returns the
   * records dropped for room.
   * @param {string} intent
   * @param {string} text
   * @param {boolean} [isNew]
   * @returns {Dropped[]}
   */
  save(intent, text, isNew) {
    const name = PREFIX + intent;
    const dropped = (isNew ?? this.get(name) === undefined) ? this.#makeRoom() : [];
    if (!this.storage) {
      this.memory.set(name, text);
      return dropped;
    }
    try {
      this.storage.setItem(name, text);
    } catch {
      throw "localStorage refused the write (quota?)";
    }
    return dropped;
  }

  /**
   * Drops the least recently updated records until one more fits.
   * @returns {Dropped[]}
   */
  #makeRoom() {
    if (this.names().length < MAX_INTENTS) return [];
    const [records, dropped] = this.all();
    records.sort((a, b) => a.updated - b.updated);
    for (const record of records.splice(0, records.length - MAX_INTENTS + 1)) {
      this.remove(record.id);
      dropped.push({ intent: record.id, reason: DROPPED_FOR_ROOM });
      record.free();
    }
    for (const record of records) record.free();
    return dropped;
  }

  /**
   * Removes a record without asking whether it was there (`remove` does).
   * @param {string} intent
   */
  discard(intent) {
    const name = PREFIX + intent;
    if (this.storage) this.storage.removeItem(name);
    else this.memory.delete(name);
  }

  /**
   * Removes a record; whether it was there.
   * @param {string} intent
   */
  remove(intent) {
    const name = PREFIX + intent;
    const existed = this.get(name) !== undefined;
    this.discard(intent);
    return existed;
  }

  /**
   * Every readable record, and the unreadable ones it removed.
   * @returns {[Intent[], Dropped[]]}
   */
  all() {
    /** @type {Intent[]} */
    const records = [];
    /** @type {Dropped[]} */
    const dropped = [];
    for (const name of this.names()) {
      try {
        const record = this.load(name.slice(PREFIX.length));
        if (record) records.push(record);
      } catch (d) {
        // What load() throws for an unreadable record.
        dropped.push(/** @type {Dropped} */ (d));
      }
    }
    return [records, dropped];
  }
}
