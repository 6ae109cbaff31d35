// The embedded database over the PostgreSQL wire protocol on 127.0.0.1 (@electric-sql/pglite-socket),
// so that Prisma Studio and psql can open it while the process that owns the folder runs (PGlite runs
// inside that process: nothing else may open the folder, server/db/pglite-lock.ts).
//
// PGlite is one connection. pglite-socket runs its client's protocol messages one by one under
// PGlite's query lock, which alone would let the service's statements run between a client's Parse and
// its Bind (the unnamed statement replaced), or inside a client's transaction, and a client's inside
// one of the service's. So both sides share one gate (async-mutex): the service takes it for each
// transaction and each statement outside one (gatedPglite); the client takes it at its first message
// and keeps it until an exchange ends (a simple Query, or a Sync, with no transaction left open; or
// its connection closing, when pglite-socket rolls an open transaction back). One client at a time:
// pglite-socket's multiplexing of several would interleave their extended-protocol exchanges the same
// way (Prisma Studio's URL asks postgres.js for one connection). A client that leaves a transaction
// open holds the service's database work until it ends it: a tool for looking, not for long
// transactions. A client idle for SQL_IDLE_MS is disconnected.
import type { PGlite } from "@electric-sql/pglite";
import { Mutex, type MutexInterface } from "async-mutex";

/** A client that stops between the messages of one exchange (outside a transaction) gives the gate back after this. */
const MID_EXCHANGE_MS = 5_000;
/** A client silent this long is disconnected. */
export const SQL_IDLE_MS = 10 * 60_000;

export interface SqlSocket {
  /** For Prisma Studio (postgres.js): no TLS, one connection. */
  url: string;
  /** The same for psql (libpq asks for TLS and GSS encryption first, which the socket does not speak). */
  psqlUrl: string;
  close(): Promise<void>;
}

/** The gate the service's side and the socket's clients share (one per PGlite instance). */
export type Gate = Mutex;
export const newGate = (): Gate => new Mutex();

/**
 * The instance as the service uses it: its transactions and its statements outside one each pass the
 * gate (a transaction's own statements, on its `tx`, are inside it already).
 */
export function gatedPglite<T extends PGlite>(lite: T, gate: Gate): T {
  return new Proxy(lite, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key === "query" || key === "exec" || key === "transaction")
        return (...args: unknown[]) => gate.runExclusive(() => value.apply(target, args));
      return value.bind(target);
    },
  });
}

/**
 * Serves `lite` on 127.0.0.1:`port` (0: a free port). The instance pglite-socket sees takes the gate
 * for each client message and holds it while that client's transaction is open.
 */
export async function serveSql(lite: PGlite, gate: Gate, port: number): Promise<SqlSocket> {
  let held: MutexInterface.Releaser | undefined;
  /** The type of the client's last message: an exchange ends after a Query (Q), a Sync (S) or a Terminate (X). */
  let last = 0;
  const hold = async () => {
    held ??= await gate.acquire();
  };
  let messages = 0;
  const release = () => {
    const r = held;
    held = undefined;
    r?.();
  };
  const letGo = () => {
    if (!held || lite.isInTransaction()) return;
    const ended = last === 0x51 || last === 0x53 || last === 0x58 || last === 0;
    if (ended) return release();
    // Mid-exchange (a Parse without its Sync yet): the rest comes within milliseconds from a live
    // client; one gone quiet (or disconnected) there gives the gate back after MID_EXCHANGE_MS.
    const at = messages;
    setTimeout(() => at === messages && !lite.isInTransaction() && release(), MID_EXCHANGE_MS).unref();
  };
  const clientSide = new Proxy(lite, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      // Each client message (pglite-socket's queue runs them one at a time).
      if (key === "runExclusive")
        return async (fn: () => Promise<unknown>) => {
          await hold();
          try {
            return await target.runExclusive(fn);
          } finally {
            letGo();
          }
        };
      if (key === "execProtocolRawStream")
        return (message: Uint8Array, ...rest: unknown[]) => {
          // A startup packet starts with its length (first byte 0): an exchange of its own.
          last = message[0] ?? 0;
          messages += 1;
          return value.apply(target, [message, ...rest]);
        };
      // The ROLLBACK of a client that left inside its transaction: under the gate it holds.
      if (key === "exec")
        return async (...args: unknown[]) => {
          await hold();
          try {
            return await value.apply(target, args);
          } finally {
            last = 0;
            letGo();
          }
        };
      return value.bind(target);
    },
  });
  // Loaded here: a PostgreSQL deployment never serves the embedded database.
  const { PGLiteSocketServer } = await import("@electric-sql/pglite-socket");
  const server = new PGLiteSocketServer({
    db: clientSide,
    host: "127.0.0.1",
    port,
    maxConnections: 1,
    idleTimeout: SQL_IDLE_MS,
  });
  await server.start();
  const bound = Number(server.getServerConn().split(":").at(-1));
  const base = `postgresql://postgres@127.0.0.1:${bound}/postgres?sslmode=disable`;
  return {
    url: `${base}&max=1`,
    psqlUrl: `${base}&gssencmode=disable`,
    async close() {
      await server.stop();
      release();
    },
  };
}
