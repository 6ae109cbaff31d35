// Named prepared statements where the connections keep them, unnamed ones where they do not
// (server/db/prepared.ts): the key lookup and the list pages are planned once per connection on
// PostgreSQL, and a pooler that does not keep them (PgBouncer in transaction mode) is recognised by
// its first refusal, which the request never sees.
// @topology pooler
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOOKUP, LOOKUP_CALL } from "../../server/auth/authenticate.js";
import { openPostgres, type Database } from "../../server/db/client.js";
import { PREPARED_LIMIT, PREPARED_TENANT_LIMIT, PreparedStatements, statementName } from "../../server/db/prepared.js";
import { freshDatabase, withDatabase, directBaseUrl, type TestDb } from "../helpers/app.js";

const onPostgres = Boolean(process.env.DATABASE_URL);

describe("PreparedStatements", () => {
  it("names a text by its digest, the same every time, and at most PREPARED_LIMIT texts", () => {
    const p = new PreparedStatements(true);
    expect(p.nameOf("SELECT 1")).toBe(statementName("SELECT 1"));
    expect(p.nameOf("SELECT 1")).toBe(p.nameOf("SELECT 1"));
    expect(p.nameOf("SELECT 2")).not.toBe(p.nameOf("SELECT 1"));
    expect(statementName("SELECT 1")).toMatch(/^crm_[0-9a-f]{32}$/);
    for (let i = 0; p.state().count < PREPARED_LIMIT; i++) expect(p.nameOf(`SELECT ${i} + 100`)).toBeDefined();
    expect(p.nameOf("SELECT 'one too many'")).toBeUndefined();
    // Texts named before the limit keep their names.
    expect(p.nameOf("SELECT 1")).toBe(statementName("SELECT 1"));
    expect(p.state()).toEqual({ named: true, count: PREPARED_LIMIT });
  });

  it("per-tenant texts (the tenant in the text on a worker's pool): named up to PREPARED_TENANT_LIMIT, the shared texts keep the rest", () => {
    const p = new PreparedStatements(true);
    for (let i = 0; i < PREPARED_TENANT_LIMIT; i++) expect(p.admitsTenantText(`SELECT '${i}'`)).toBe(true);
    // Beyond the share: refused (the caller sends the shared text), and not named.
    expect(p.admitsTenantText("SELECT 'one tenant too many'")).toBe(false);
    expect(p.state().count).toBe(PREPARED_TENANT_LIMIT);
    // One admitted before stays admitted, under the same name.
    expect(p.admitsTenantText("SELECT '0'")).toBe(true);
    expect(p.nameOf("SELECT '0'")).toBe(statementName("SELECT '0'"));
    // The shared texts still get every remaining name.
    for (let i = 0; p.state().count < PREPARED_LIMIT; i++) expect(p.nameOf(`SELECT ${i} + 100`)).toBeDefined();
    // Where nothing is named (a pooler's connections), a per-tenant text is as good as any: admitted, unnamed.
    const pooled = new PreparedStatements(false);
    expect(pooled.admitsTenantText("SELECT 'x'")).toBe(true);
    expect(pooled.nameOf("SELECT 'x'")).toBeUndefined();
  });

  it("a pooler's refusals switch it to unnamed statements for good, once; other errors do not", () => {
    const reasons: string[] = [];
    const p = new PreparedStatements(true, (r) => reasons.push(r));
    expect(p.refusedBy(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false);
    expect(p.refusedBy(Object.assign(new Error("not supported"), { code: "0A000" }))).toBe(false);
    expect(p.refusedBy(new Error("connection reset"))).toBe(false);
    expect(p.state().named).toBe(true);
    expect(p.refusedBy(Object.assign(new Error('prepared statement "crm_x" does not exist'), { code: "26000" }))).toBe(
      true,
    );
    expect(p.state().named).toBe(false);
    expect(p.nameOf("SELECT 1")).toBeUndefined();
    expect(p.refusedBy(Object.assign(new Error('prepared statement "crm_x" already exists'), { code: "42P05" }))).toBe(
      true,
    );
    expect(p.refusedBy(Object.assign(new Error("cached plan must not change result type"), { code: "0A000" }))).toBe(
      true,
    );
    expect(
      p.refusedBy(
        Object.assign(new Error("le plan en cache ne doit pas modifier le type en résultat"), {
          code: "0A000",
          routine: "RevalidateCachedQuery",
        }),
      ),
    ).toBe(true);
    expect(reasons).toEqual([`26000: prepared statement "crm_x" does not exist`]);
    expect(new PreparedStatements(false).nameOf("SELECT 1")).toBeUndefined();
  });
});

describe.runIf(onPostgres)("prepared statements on PostgreSQL", () => {
  let t: TestDb;
  // One connection straight to PostgreSQL, so that what it keeps can be read back on it.
  let direct: string;
  const open: Database[] = [];
  const pool = async (opts: { pooled?: boolean; onUnnamed?: (r: string) => void } = {}) => {
    const db = await openPostgres(direct, { max: 1, ...opts });
    open.push(db);
    return db;
  };
  const kept = async (db: Database) =>
    (
      await db.sql.query<{ name: string }>(
        `SELECT name FROM pg_prepared_statements WHERE name LIKE 'crm\\_%' ORDER BY name`,
      )
    ).map((r) => r.name);
  const TEXT = `SELECT $1::int + 1 AS "n", 'prepared' AS "how"`;

  beforeAll(async () => {
    t = await freshDatabase();
    direct = withDatabase(directBaseUrl()!, new URL(t.url!).pathname.slice(1));
  });
  afterAll(async () => {
    for (const db of open) await db.close();
    await t.drop();
  });

  it("a `prepare` statement is kept by the connection under its name and answers as an unnamed one", async () => {
    const db = await pool();
    expect(await db.sql.query(TEXT, [41], { prepare: true })).toEqual([{ n: 42, how: "prepared" }]);
    expect(await db.sql.query(TEXT, [1], { prepare: true })).toEqual([{ n: 2, how: "prepared" }]);
    expect(await kept(db)).toEqual([statementName(TEXT)]);
    // Not asked: unnamed, nothing kept.
    await db.sql.query(`SELECT 2 AS "two"`);
    expect(await kept(db)).toEqual([statementName(TEXT)]);
    expect(db.prepared!()).toEqual({ named: true, count: 1 });
  });

  it("the key lookup is the named join, not the function call, where statements are kept", async () => {
    const db = await pool();
    expect(await db.sql.query(LOOKUP, ["crm_nosuchkey0000"], { prepare: { unnamed: LOOKUP_CALL } })).toEqual([]);
    expect(await kept(db)).toEqual([statementName(LOOKUP)]);
  });

  it("a connection that lost the statement (a pooler's other server connection): answered unnamed, and unnamed from then on", async () => {
    const reasons: string[] = [];
    const db = await pool({ onUnnamed: (r) => reasons.push(r) });
    await db.sql.query(TEXT, [1], { prepare: true });
    // The server forgets it; the client still believes it parsed: the next Bind names a statement
    // this server connection does not have (26000), as when PgBouncer hands over another one.
    await db.sql.exec("DEALLOCATE ALL");
    expect(await db.sql.query(TEXT, [5], { prepare: true })).toEqual([{ n: 6, how: "prepared" }]);
    expect(db.prepared!().named).toBe(false);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/^26000: /);
    // The unnamed text is what is sent now: the key lookup as the function call.
    expect(await db.sql.query(LOOKUP, ["crm_nosuchkey0000"], { prepare: { unnamed: LOOKUP_CALL } })).toEqual([]);
    expect(await kept(db)).toEqual([]);
  });

  it("a connection that already has the name (another client's Parse on a pooled server connection): answered unnamed", async () => {
    const db = await pool();
    await db.sql.exec(`PREPARE ${statementName(TEXT)} (int) AS ${TEXT.replace("$1::int", "$1")}`);
    expect(await db.sql.query(TEXT, [9], { prepare: true })).toEqual([{ n: 10, how: "prepared" }]);
    expect(db.prepared!().named).toBe(false);
  });

  it("a migration that changes a kept statement's columns (0A000 cached plan): answered unnamed, with the new columns", async () => {
    const db = await pool();
    await db.sql.exec(`CREATE TABLE "PreparedProbe" ("id" int PRIMARY KEY); INSERT INTO "PreparedProbe" VALUES (1)`);
    const text = `SELECT * FROM "PreparedProbe" WHERE "id" = $1::int`;
    expect(await db.sql.query(text, [1], { prepare: true })).toEqual([{ id: 1 }]);
    await db.sql.exec(`ALTER TABLE "PreparedProbe" ADD COLUMN "label" text DEFAULT 'new'`);
    expect(await db.sql.query(text, [1], { prepare: true })).toEqual([{ id: 1, label: "new" }]);
    expect(db.prepared!().named).toBe(false);
  });

  it("told it is pooled (DATABASE_URL ≠ DIRECT_DATABASE_URL), it never names a statement", async () => {
    const db = await pool({ pooled: true });
    expect(await db.sql.query(TEXT, [1], { prepare: true })).toEqual([{ n: 2, how: "prepared" }]);
    expect(await kept(db)).toEqual([]);
    expect(db.prepared!()).toEqual({ named: false, count: 0 });
  });

  it("inside a session (a transaction script) nothing is named: a refusal there could not be retried", async () => {
    const db = await pool();
    await db.sql.session(async (s) => {
      await s.exec("BEGIN");
      expect(await s.query(TEXT, [1], { prepare: true })).toEqual([{ n: 2, how: "prepared" }]);
      await s.exec("COMMIT");
    });
    expect(await kept(db)).toEqual([]);
  });

  it("an error of the statement itself is the statement's, not a refusal", async () => {
    const db = await pool();
    await expect(db.sql.query(`SELECT 1 / $1::int AS "x"`, [0], { prepare: true })).rejects.toMatchObject({
      code: "22012",
    });
    expect(db.prepared!().named).toBe(true);
    expect(await db.sql.query(`SELECT 1 / $1::int AS "x"`, [1], { prepare: true })).toEqual([{ x: 1 }]);
  });
});

// The CI leg through PgBouncer 1.18 in transaction mode (DATABASE_URL → PgBouncer, DIRECT_DATABASE_URL
// → PostgreSQL): a pool not told it is pooled finds out from the refusals, and no query fails.
const throughPooler = Boolean(
  process.env.DATABASE_URL &&
    process.env.DIRECT_DATABASE_URL &&
    process.env.DIRECT_DATABASE_URL !== process.env.DATABASE_URL,
);
describe.runIf(throughPooler)("prepared statements through a transaction pooler", () => {
  it("200 concurrent named statements on 4 connections: every one answers (130 failed without the fallback)", async () => {
    const t = await freshDatabase();
    const reasons: string[] = [];
    const db = await openPostgres(t.url!, { max: 4, onUnnamed: (r) => reasons.push(r) });
    try {
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          db.sql.query<{ n: number }>(`SELECT $1::int + 1 AS "n", pg_backend_pid() AS "pid"`, [i], { prepare: true }),
        ),
      );
      expect(answers.map((r) => r[0]!.n)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      // Which statements met a refusal depends on PgBouncer's choice of server connections; when one
      // did, the pool switched once.
      expect(reasons.length).toBe(db.prepared!().named ? 0 : 1);
    } finally {
      await db.close();
      await t.drop();
    }
  });
});
