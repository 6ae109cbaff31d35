// What the service reads once per database from its catalog (a module of its own: client.ts imports
// delegate.ts, which uses this at load time).
import type { Database } from "./client.js";

/**
 * A fact about a database read once and kept (a failed read is read again by the next call): what
 * the service decides at start from the catalog (server/db/delegate.ts tenantDelegation,
 * server/auth/authenticate.ts keyLookup). `forget` drops it (read again next time); `set` fixes it (tests).
 */
export function readOncePerDatabase<T>(read: (db: Database) => Promise<T>) {
  const found = new WeakMap<Database, Promise<T>>();
  const get = (db: Database): Promise<T> => {
    let p = found.get(db);
    if (!p) {
      const reading = read(db);
      found.set(db, reading);
      reading.catch(() => {
        if (found.get(db) === reading) found.delete(db);
      });
      p = reading;
    }
    return p;
  };
  return {
    get,
    /** Read again by the next get(), unless another read has replaced `stale` meanwhile. */
    forget(db: Database, stale?: Promise<T>) {
      if (stale === undefined || found.get(db) === stale) found.delete(db);
    },
    set(db: Database, value: T) {
      found.set(db, Promise.resolve(value));
    },
  };
}
