// The statement timeout of the PostgreSQL pool, also behind a pooler that refuses it as a startup
// parameter.
//
// node-postgres sends the pool's `statement_timeout` as a startup parameter of every connection
// (server/db/client.ts connectionSettings): no SET, no round trip, nothing a transaction-mode pooler
// could lose. PgBouncer accepts only a few startup parameters, plus those its
// `ignore_startup_parameters` lists; with a list without statement_timeout (e.g.
// `extra_float_digits,options`, a common config) it refuses every connection:
// FATAL 08P01 "unsupported startup parameter: statement_timeout".
//
// The pool then falls back by itself, once and for good, like the named-statement fallback
// (server/db/prepared.ts): the refused connection ran nothing, so the checkout that met the refusal
// is simply made again — on a connection without the parameter — and the request never sees it. From
// then on the pool's connections are SetLocalClients, which keep the timeout by the only route that
// is safe in transaction pooling, SET LOCAL (a server connection is ours for one transaction only, so
// a session SET would leak into other clients' transactions; SET LOCAL ends with the transaction):
// - a transaction's BEGIN is sent as `BEGIN; SET LOCAL statement_timeout = N` (one simple query:
//   no added round trip);
// - a statement outside a transaction with parameters (Prisma's single queries, the raw runner's
//   statements, the one-statement creates) is sent as `BEGIN; SET LOCAL …` → the statement →
//   COMMIT (ROLLBACK if it failed): two more round trips;
// - one without parameters (the simple query protocol: a ping, SHOW) as one string
//   `SET LOCAL statement_timeout = N; <statement>`, whose statements PostgreSQL runs as one implicit
//   transaction: no added round trip;
// - statements inside a transaction, transaction control outside one (COMMIT, ROLLBACK, …) and the
//   statements PostgreSQL refuses in a transaction block (VACUUM, CREATE DATABASE, … CONCURRENTLY)
//   go as they are.
// A statement cut by the timeout fails with 57014 as before (→ 503, server/errors.ts). The normal
// path is untouched: until a refusal, the pool's clients are node-postgres's own; the pool's only
// addition is the callback of each checkout that looks at a failed connect.
import pg from "pg";

/** How the pool's statements get their statement_timeout. */
export interface StatementTimeoutState {
  /** The timeout in ms (0: none). */
  ms: number;
  /**
   * "startup parameter": sent with every connection (PostgreSQL itself, or a pooler that accepts or
   * ignores it); "SET LOCAL": the pooler refused the startup parameter, the pool sets it in every
   * transaction; "none": no timeout.
   */
  route: "startup parameter" | "SET LOCAL" | "none";
}

/**
 * Whether `err`, raised while connecting, is a pooler's refusal of the statement_timeout startup
 * parameter (PgBouncer: FATAL 08P01 "unsupported startup parameter: statement_timeout"; older
 * versions capitalise "Unsupported").
 */
export function refusesStartupTimeout(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  return (
    e?.code === "08P01" && /startup parameter/i.test(e.message ?? "") && /\bstatement_timeout\b/.test(e.message ?? "")
  );
}

type Checkout = (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void;

/** A pg.Pool (so @prisma/adapter-pg takes it) that falls back to SET LOCAL when the startup parameter is refused. */
export class TimeoutPool extends pg.Pool {
  private setLocal = false;

  constructor(
    config: pg.PoolConfig,
    /** Told once, when the pool falls back (the reason: the pooler's error). */
    private readonly onFallback?: (reason: string) => void,
  ) {
    super(config);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: Checkout): void;
  override connect(callback?: Checkout): Promise<pg.PoolClient> | undefined {
    // A refused checkout is made once more after the switch: its connection never got to run
    // anything. Bounded: one retry per checkout (a connection made after the switch does not send
    // the parameter, so it cannot be refused for it).
    if (!callback)
      return super.connect().catch((err: unknown) => (this.refused(err) ? super.connect() : Promise.reject(err)));
    super.connect(((err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) =>
      err && this.refused(err) ? super.connect(callback as never) : callback(err, client, done)) as never);
  }

  statementTimeout(): StatementTimeoutState {
    const ms = Number(this.options.statement_timeout) || 0;
    return { ms, route: ms === 0 ? "none" : this.setLocal ? "SET LOCAL" : "startup parameter" };
  }

  /** Whether err is the refusal; the first one switches the pool's new connections to SetLocalClient. */
  private refused(err: unknown): boolean {
    if (!refusesStartupTimeout(err)) return false;
    if (!this.setLocal) {
      this.setLocal = true;
      // pg-pool creates every client as `new this.Client(this.options)`.
      (this as unknown as { Client: typeof pg.Client }).Client = SetLocalClient;
      const e = err as { code?: string; message?: string };
      this.onFallback?.(`${e.code}: ${e.message}`);
    }
    return true;
  }
}

// Leading blanks and comments, then the statement's first words.
const LEADING = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*/;
/** A lone BEGIN / START TRANSACTION (with its modes). */
const BEGIN = /^(?:BEGIN|START\s+TRANSACTION)\b[^;]*;?\s*$/i;
/** Transaction control (sent as is outside a transaction) and what PostgreSQL refuses inside a transaction block. */
const AS_IS =
  /^(?:COMMIT|END|ROLLBACK|ABORT|SAVEPOINT|RELEASE|PREPARE\s+TRANSACTION|VACUUM|REINDEX|ALTER\s+SYSTEM|(?:CREATE|DROP)\s+(?:DATABASE|TABLESPACE)|CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY|DROP\s+INDEX\s+CONCURRENTLY|(?:CREATE|ALTER|DROP)\s+SUBSCRIPTION|DISCARD\s+ALL)\b/i;

type QueryConfig = {
  text?: string;
  name?: string;
  values?: unknown[];
  rows?: number;
  queryMode?: string;
  submit?: unknown;
};
type Callback = (err: Error | undefined, res?: unknown) => void;

/**
 * A connection without the statement_timeout startup parameter that sets the pool's timeout with
 * SET LOCAL (the header above). Its queries run one after another: whether one is inside a
 * transaction is read from the connection's last ReadyForQuery, which is only current once the
 * previous query has finished.
 */
export class SetLocalClient extends pg.Client {
  private readonly setLocal: string;
  private last: Promise<unknown> = Promise.resolve();

  constructor(config: pg.ClientConfig) {
    super({ ...config, statement_timeout: undefined });
    this.setLocal = `SET LOCAL statement_timeout = ${Math.trunc(Number(config.statement_timeout) || 0)}`;
  }

  // pg's overloads (promise or callback; text or config; a Submittable) in one signature.
  // biome-ignore lint/suspicious/noExplicitAny: one body for pg's query() overloads (a Promise, void or a Submittable)
  override query(config: unknown, values?: unknown, callback?: unknown): any {
    // A Submittable (pg-cursor, pg-query-stream) drives the protocol itself: sent as is.
    if (config != null && typeof (config as { submit?: unknown }).submit === "function")
      return super.query(config as never, values as never, callback as never);
    if (typeof values === "function") [callback, values] = [values, undefined];
    // The overloads' text or config, and its values.
    const statement = config as string | QueryConfig;
    const params = values as unknown[] | undefined;
    const run = this.last.then(() => this.timed(statement, params));
    this.last = run.then(noop, noop);
    if (typeof callback !== "function") return run;
    run.then(
      (res) => (callback as Callback)(undefined, res),
      (err: Error) => (callback as Callback)(err),
    );
  }

  private async timed(config: string | QueryConfig, values: unknown[] | undefined): Promise<unknown> {
    const text = typeof config === "string" ? config : config?.text;
    // In a transaction ("T", or "E" after an error): as is. Not yet known (null: the first query of a
    // connection, issued from its connect callback before pg records the first ReadyForQuery): idle.
    const status = this.getTransactionStatus();
    if (typeof text !== "string" || status === "T" || status === "E")
      return super.query(config as never, values as never);
    const head = text.replace(LEADING, "");
    if (head === "" || AS_IS.test(head)) return super.query(config as never, values as never);
    // The simple query protocol (no parameters, no name): a string of several statements is allowed.
    const simple =
      !values?.length &&
      (typeof config === "string" ||
        (!config.name && !config.rows && config.queryMode !== "extended" && !config.values?.length));
    if (BEGIN.test(head)) {
      // A newline first: the text may end in a -- comment (an empty statement between is skipped).
      if (simple)
        return (
          (await super.query(
            withText(config, `${text}\n;${this.setLocal}`) as never,
            values as never,
          )) as unknown as unknown[]
        )[0];
      const begun = await super.query(config as never, values as never);
      await super.query(this.setLocal);
      return begun;
    }
    if (simple) {
      // One implicit transaction: SET LOCAL holds for the statements after it in the same string.
      const results = (await super.query(
        withText(config, `${this.setLocal};\n${text}`) as never,
        values as never,
      )) as unknown as unknown[];
      return results.length === 2 ? results[1] : results.slice(1);
    }
    await super.query(`BEGIN; ${this.setLocal}`);
    try {
      const result = await super.query(config as never, values as never);
      await super.query("COMMIT");
      return result;
    } catch (err) {
      // The statement failed (or COMMIT did, which ends the transaction itself).
      if (this.getTransactionStatus() !== "I") await super.query("ROLLBACK").catch(noop);
      throw err;
    }
  }
}

const noop = () => {};
const withText = (config: string | QueryConfig, text: string) =>
  typeof config === "string" ? text : { ...config, text };
