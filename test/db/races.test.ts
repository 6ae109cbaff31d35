// Races and slow statements, through HTTP, with the other party played by the database
// directly: an Idempotency-Key record purged between the claim's INSERT and SELECT, two requests
// taking over one expired key, a deadlock, a statement past statement_timeout; and the abandoned-send
// sweep on its partial index. The concurrency cases need real PostgreSQL (PGlite runs one
// transaction at a time, so they cannot happen there).
// @topology pooler citus
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { ABANDONED_DELIVERY_SWEEP, failAbandonedDeliveries } from "../../server/channels/messages.js";
import { openPostgres } from "../../server/db/client.js";
import { directBaseUrl, expectEnvelope, startApp, withDatabase, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { citusCluster, lockWaits, tenantPlacements } from "../helpers/cluster.js";

const onPostgres = Boolean(process.env.DATABASE_URL);
/** Why a case is skipped on PGlite (in its title). */
const NOT_PGLITE = "(not on PGlite: one transaction at a time)";
let app: TestApp & { testDb: { url?: string } };
let ids: LoadResult;

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", {
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001" }],
        leads: [{ ref: "l1", customerName: "Lead one" }],
        conversations: [{ ref: "c1", channel: "site", identity: { externalId: "web-1" } }],
      }),
    ),
  );
});
afterAll(() => app.close());

const acme = () => ids.tenants.acme!;
const key = () => acme().apiKeys.full!.key;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function newTicket() {
  const r = await app.request("POST", "/public/v1/tickets", {
    key: key(),
    body: { subject: "Race", customerId: acme().contacts.bea },
  });
  expect(r.status).toBe(201);
  return r.body.id as string;
}
const comment = (id: string, body: string, headers: Record<string, string> = {}) =>
  app.request("POST", `/public/v1/tickets/${id}/comments`, { key: key(), body: { body }, headers });
const commentCount = async (ticketId: string) => app.db.prisma.ticketComment.count({ where: { ticketId } });
const expire = (k: string) =>
  app.db.sql.query(
    `UPDATE "IdempotencyRecord" SET "expiresAt" = now() - interval '1 hour' WHERE "tenantId" = $1 AND "key" = $2`,
    [acme().id, k],
  );

/** A connection of the test's own (the other party of a race), to the service's database or to `url`. */
async function other(url = app.testDb.url): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  return c;
}

/**
 * Waits until `n` backends of this database wait for a lock; returns, for each, the pids it waits for
 * (on Citus the waits are on the workers, seen through citus_lock_waits: test/helpers/cluster.ts).
 */
async function lockWaiters(n: number, timeoutMs = 15_000): Promise<number[][]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await lockWaits((q, p) => app.db.sql.query(q, p));
    if (rows.length >= n) return rows.map((r) => r.blockers);
    if (Date.now() > deadline) throw new Error(`only ${rows.length} of ${n} lock waiters`);
    await sleep(50);
  }
}
const pidOf = async (c: pg.Client) => (await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;

describe("Idempotency-Key records under races", () => {
  it("a record purged between the claim's INSERT and its SELECT: the claim starts again (201, never 500)", async () => {
    const id = await newTicket();
    const first = await comment(id, "purged", { "Idempotency-Key": "purge-race" });
    expect(first.status).toBe(201);
    await expire("purge-race");
    // The hourly purge, run by the database right after the claim's INSERT … ON CONFLICT DO NOTHING
    // (a statement trigger), i.e. exactly between that INSERT and the SELECT of the record.
    // The tenant's records (a trigger's statements pin one tenant: on Citus it runs on the shard). One
    // statement per exec: Citus refuses DDL in a multi-statement string.
    await app.db.sql.exec(`
      CREATE FUNCTION test_purge() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN DELETE FROM "IdempotencyRecord" WHERE "tenantId" = '${acme().id}' AND "expiresAt" <= now(); RETURN NULL; END $$`);
    await app.db.sql.exec(
      `CREATE TRIGGER test_purge AFTER INSERT ON "IdempotencyRecord" FOR EACH STATEMENT EXECUTE FUNCTION test_purge()`,
    );
    try {
      const again = await comment(id, "purged", { "Idempotency-Key": "purge-race" });
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBeNull();
      expect(again.body.comments).toHaveLength(2);
    } finally {
      await app.db.sql.exec(`DROP TRIGGER test_purge ON "IdempotencyRecord"`);
      await app.db.sql.exec(`DROP FUNCTION test_purge()`);
    }
    expect(await commentCount(id)).toBe(2);
    const [rec] = await app.db.sql.query<{ live: boolean }>(
      `SELECT "expiresAt" > now() AS live FROM "IdempotencyRecord" WHERE "tenantId" = $1 AND "key" = 'purge-race'`,
      [acme().id],
    );
    expect(rec?.live).toBe(true);
  });

  it.runIf(onPostgres)(`two requests reusing one expired key: one takes over, one replays ${NOT_PGLITE}`, async () => {
    const id = await newTicket();
    expect((await comment(id, "take-over", { "Idempotency-Key": "takeover-race" })).status).toBe(201);
    await expire("takeover-race");

    // Hold the expired record so that both requests reach the take-over before either can do it.
    const locker = await other();
    try {
      await locker.query("BEGIN");
      await locker.query(
        `SELECT 1 FROM "IdempotencyRecord" WHERE "tenantId" = $1 AND "key" = 'takeover-race' FOR UPDATE`,
        [acme().id],
      );
      const both = Promise.all([1, 2].map(() => comment(id, "take-over", { "Idempotency-Key": "takeover-race" })));
      await lockWaiters(2);
      await locker.query("COMMIT");
      const [a, b] = (await both) as [Awaited<ReturnType<typeof comment>>, Awaited<ReturnType<typeof comment>>];
      expect([a.status, b.status]).toEqual([201, 201]);
      expect([a, b].filter((r) => r.headers.get("idempotent-replayed") === "true")).toHaveLength(1);
      expect(a.text).toBe(b.text);
      expect(await commentCount(id)).toBe(2); // the first use and one take-over: one provider-like side effect
    } finally {
      await locker.end();
    }
  });
});

describe.runIf(onPostgres)(`deadlocks ${NOT_PGLITE}`, () => {
  it("a write transaction chosen as a deadlock victim is run again: 201, never 500", async () => {
    const id = await newTicket();
    // The rows are locked where the request's statements lock them (on Citus: on the worker that holds
    // the tenant's shards, in its copies of User and Tenant and the tenant's Ticket shard, by name:
    // test/helpers/cluster.ts tenantPlacements); on one PostgreSQL the tables themselves.
    const at = await tenantPlacements(app.testDb.url!, acme().id, ["User", "Tenant", "Ticket"] as const);
    const tenantLock = await other(at.url);
    const userLock = await other(at.url);
    try {
      // The comment's transaction locks the ticket row (thread counters), then checks its foreign keys:
      // the author first (its row is held by the session named tenantLock, so it waits there), then
      // the tenant (held by the session named userLock). The order is PostgreSQL's order of the
      // foreign-key triggers (by name); lockWaiters below asserts the request waits where expected.
      await tenantLock.query("BEGIN");
      await tenantLock.query(`SELECT 1 FROM ${at.table.User} WHERE "id" = $1 FOR UPDATE`, [acme().users.ana]);
      await userLock.query("SET deadlock_timeout = '60s'"); // the service's transaction is the one to detect it
      await userLock.query("BEGIN");
      await userLock.query(`SELECT 1 FROM ${at.table.Tenant} WHERE "id" = $1 FOR UPDATE`, [acme().id]);

      const request = comment(id, "deadlocked");
      expect(await lockWaiters(1)).toEqual([[await pidOf(tenantLock)]]);
      // userLock now waits for the ticket row the request holds …
      const ticketUpdate = userLock.query(
        `UPDATE ${at.table.Ticket} SET "subject" = "subject" WHERE "tenantId" = $1 AND "id" = $2`,
        [acme().id, id],
      );
      await lockWaiters(2);
      // … and once the tenant is released the request waits for the author userLock holds: a cycle,
      // which the request's backend detects after deadlock_timeout (40P01) — then it is run again.
      await tenantLock.query("COMMIT");
      await ticketUpdate;
      await userLock.query("COMMIT");
      const r = await request;
      expect(r.status).toBe(201);
      expect(r.body.comments.map((c: any) => c.body)).toEqual(["deadlocked"]);
      expect(await commentCount(id)).toBe(1);
    } finally {
      await tenantLock.end();
      await userLock.end();
    }
  });
});

describe("a one-statement create chosen as a deadlock victim", () => {
  // The create is one statement in its implicit transaction (server/idempotency.ts): aborted as a
  // deadlock victim it wrote nothing, and the create runs its transactional path (FALL_BACK_STATES),
  // itself retried on a deadlock (server/db/transaction.ts).
  // The victim is played by a trigger that raises 40P01 on its first run only (a sequence: nextval is
  // not rolled back). On Citus the trigger fires on the shard, on the worker that holds the tenant's
  // rows (either routing: the create is delegated there): CREATE TRIGGER on the distributed table
  // reaches its shards, with its function; the sequence, which nothing distributed names, is made on
  // each worker (run_command_on_workers), and the one of the tenant's worker counts the attempts.
  it("the transactional path writes it: 201, one lead, one key record, two attempts", async () => {
    const cluster = onPostgres ? await citusCluster(directBaseUrl()!) : null;
    const sql = (text: string) => app.db.sql.exec(text);
    const onWorkers = async (command: string) => {
      const rows = await app.db.sql.query<{ success: boolean; result: string }>(
        `SELECT success, result FROM run_command_on_workers($1)`,
        [command],
      );
      expect(rows.filter((r) => !r.success)).toEqual([]);
      return rows.map((r) => r.result);
    };
    const sequence = (text: string) => (cluster ? onWorkers(text) : sql(text));
    await sequence(`CREATE SEQUENCE "test_victim_once"`);
    await sql(`CREATE FUNCTION "test_victim_once"() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN IF nextval('"test_victim_once"') = 1 THEN RAISE EXCEPTION 'deadlock detected (test)' USING ERRCODE = '40P01'; END IF; RETURN NULL; END $$`);
    await sql(
      `CREATE TRIGGER "test_victim_once" AFTER INSERT ON "Lead" FOR EACH ROW
       WHEN (NEW."customerName" = 'Victim') EXECUTE FUNCTION "test_victim_once"()`,
    );
    try {
      const r = await app.request("POST", "/public/v1/leads", {
        key: key(),
        body: { customerName: "Victim" },
        headers: { "Idempotency-Key": "victim-1" },
      });
      expect(r.status, r.text).toBe(201);
      expect(r.body.customerName).toBe("Victim");
      const [row] = await app.db.sql.query<{ leads: number; records: number }>(
        `SELECT (SELECT count(*)::int FROM "Lead" WHERE "tenantId" = $1 AND "customerName" = 'Victim') AS leads,
                (SELECT count(*)::int FROM "IdempotencyRecord"
                  WHERE "tenantId" = $1 AND "key" = 'victim-1') AS records`,
        [acme().id],
      );
      expect(row).toEqual({ leads: 1, records: 1 });
      // Each node's count of the trigger's runs (a worker that never ran it: 0).
      const used = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM "test_victim_once"`;
      const attempts = cluster
        ? (await onWorkers(used)).map(Number)
        : (await app.db.sql.query<{ n: string }>(used)).map((x) => Number(x.n));
      expect(attempts.reduce((a, b) => a + b, 0)).toBe(2);
      // The key answers the stored response.
      const again = await app.request("POST", "/public/v1/leads", {
        key: key(),
        body: { customerName: "Victim" },
        headers: { "Idempotency-Key": "victim-1" },
      });
      expect(again.status).toBe(201);
      expect(again.body.id).toBe(r.body.id);
    } finally {
      await sql(`DROP TRIGGER "test_victim_once" ON "Lead"`);
      await sql(`DROP FUNCTION "test_victim_once"()`);
      await sequence(`DROP SEQUENCE "test_victim_once"`);
    }
  });
});

describe.runIf(onPostgres)(`statement_timeout ${NOT_PGLITE}`, () => {
  it("a statement running past DATABASE_STATEMENT_TIMEOUT_MS answers 503 SERVICE_UNAVAILABLE and changes nothing", async () => {
    // Straight to PostgreSQL: behind PgBouncer (the CI leg) the pool's startup parameter is ignored and
    // the timeout is the pooler's connect_query (docs/scaling.md), so this pool sets its own directly.
    const direct = withDatabase(directBaseUrl()!, new URL(app.testDb.url!).pathname.slice(1));
    const timed = await openPostgres(direct, { max: 2, statementTimeoutMs: 400 });
    const slow = await startApp({ db: { db: timed, url: app.testDb.url, drop: async () => {} } });
    const locker = await other();
    try {
      const [setting] = await timed.sql.query<{ statement_timeout: string }>("SHOW statement_timeout");
      expect(setting!.statement_timeout).toBe("400ms");
      const leadId = acme().leads.l1!;
      await locker.query("BEGIN");
      await locker.query(`SELECT 1 FROM "Lead" WHERE "tenantId" = $1 AND "id" = $2 FOR UPDATE`, [acme().id, leadId]);
      // Without a statement timeout the PATCH would wait for the lock: release it after 30 s anyway.
      const release = setTimeout(() => void locker.query("ROLLBACK").catch(() => {}), 30_000);
      const started = Date.now();
      const r = await slow.request("PATCH", `/public/v1/leads/${leadId}`, { key: key(), body: { notes: "changed" } });
      clearTimeout(release);
      expectEnvelope(r, 503, "SERVICE_UNAVAILABLE");
      expect(Date.now() - started).toBeLessThan(15_000); // cut by the 400 ms timeout, well before the lock is released
      await locker.query("ROLLBACK");
      const lead = await app.db.prisma.lead.findUniqueOrThrow({
        where: { tenantId_id: { tenantId: acme().id, id: leadId } },
      });
      expect(lead.notes).toBeNull();
      // The pool is fine afterwards.
      expect((await slow.request("GET", `/public/v1/leads/${leadId}`, { key: key() })).status).toBe(200);
    } finally {
      await locker.end();
      await slow.close();
      await timed.close();
    }
  });
});

describe("abandoned-send sweep", () => {
  it("marks only stale pending operator messages failed, through the partial index", async () => {
    const conv = acme().conversations.c1!;
    const insert = (role: string, status: string, ageSeconds: number) =>
      app.db.sql.query<{ id: string }>(
        `INSERT INTO "Message" ("tenantId", "conversationId", "role", "content", "deliveryStatus", "createdAt")
         VALUES ($1, $2, $3::"MessageRole", 'x', $4, now() - make_interval(secs => $5)) RETURNING "id"`,
        [acme().id, conv, role, status, ageSeconds],
      );
    const [stale] = await insert("operator", "pending", 600);
    const [fresh] = await insert("operator", "pending", 1);
    const [user] = await insert("user", "received", 600);
    expect(await failAbandonedDeliveries(app.db.prisma, 60_000)).toBe(1);
    const status = async (id: string) =>
      (await app.db.prisma.message.findUniqueOrThrow({ where: { tenantId_id: { tenantId: acme().id, id } } }))
        .deliveryStatus;
    expect([await status(stale!.id), await status(fresh!.id), await status(user!.id)]).toEqual([
      "failed",
      "pending",
      "received",
    ]);

    // The sweep's statement can use the partial index (its predicate matches the index's).
    const plan = await app.db.sql.session(async (s) => {
      await s.exec("BEGIN");
      try {
        await s.exec("SET LOCAL enable_seqscan = off");
        const prepared = ABANDONED_DELIVERY_SWEEP.replace("$1::timestamptz", "now() - interval '1 minute'");
        return await s.query<{ "QUERY PLAN": string }>(`EXPLAIN ${prepared}`);
      } finally {
        await s.exec("ROLLBACK");
      }
    });
    expect(plan.map((r) => r["QUERY PLAN"]).join("\n")).toContain("Message_pending_operator_idx");
  });
});
