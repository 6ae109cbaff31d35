// waitForLockWaiters (test/helpers/locks.ts), the proof that requests wait on a lock: it sees
// sessions queued behind a row lock (on Citus on the worker that holds the row), counts only the kind
// of lock asked for, and fails with what the database was doing when too few ever wait.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type TestApp } from "../helpers/app.js";
import { citusCluster } from "../helpers/cluster.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { waitForLockWaiters } from "../helpers/locks.js";
import { directBaseUrl } from "../helpers/template.js";

const onPostgres = Boolean(process.env.DATABASE_URL);

describe("waitForLockWaiters", () => {
  let app: TestApp & { testDb: { directUrl?: string; url?: string } };
  let tenantId: string;
  let leadId: string;
  beforeAll(async () => {
    app = await startApp();
    const ids = await app.load(fixture(tenant("acme", { leads: [{ ref: "l1", customerName: "Locked" }] })));
    tenantId = ids.tenants.acme!.id;
    leadId = ids.tenants.acme!.leads.l1!;
  });
  afterAll(async () => {
    await app?.close();
  });

  it("sees the sessions queued behind a held row lock, on the node that holds the row (PGlite: refused)", async () => {
    if (!onPostgres) {
      // One statement at a time: nothing ever waits on a lock there.
      await expect(waitForLockWaiters(app.testDb, 1)).rejects.toThrow(/PostgreSQL test database/);
      return;
    }
    const sessions: pg.Client[] = [];
    const session = async () => {
      const c = new pg.Client({ connectionString: app.testDb.directUrl });
      c.on("error", () => {});
      await c.connect();
      sessions.push(c);
      return c;
    };
    const row = `WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`;
    try {
      const holder = await session();
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "Lead" ${row} FOR UPDATE`, [tenantId, leadId]);
      // None waits yet: the deadline passes and the error says what every backend was doing.
      await expect(waitForLockWaiters(app.testDb, 1, { timeoutMs: 300 })).rejects.toThrow(
        /fewer than 1 backends waiting.*"state"/,
      );
      const update = `UPDATE "Lead" SET "notes" = 'waited' ${row}`;
      const writes = [await session(), await session()].map((c) =>
        c.query(update, [tenantId, leadId]).then(
          () => "done",
          () => "failed",
        ),
      );
      const waiters = await waitForLockWaiters(app.testDb, 2);
      expect(waiters.length).toBeGreaterThanOrEqual(2);
      // Theirs (on a Citus worker: the statement on the tenant's shard, "Lead_<shard id>").
      for (const w of waiters) expect(w.query, JSON.stringify(w)).toMatch(/^UPDATE (public\.)?"?Lead(_\d+)?"? /);
      expect(waiters.every((w) => w.locktype !== null)).toBe(true);
      // Row locks, not advisory ones: asked for those, it finds none.
      await expect(waitForLockWaiters(app.testDb, 1, { locktype: "advisory", timeoutMs: 300 })).rejects.toThrow(
        /advisory lock/,
      );
      const cluster = await citusCluster(directBaseUrl()!);
      if (cluster) {
        const workers = cluster.workers.map((w) => `${w.host}:${w.port}`);
        expect(waiters.filter((w) => workers.includes(w.node)).length, "waiting on a worker").toBeGreaterThanOrEqual(2);
      }
      await holder.query("COMMIT");
      expect(await Promise.all(writes)).toEqual(["done", "done"]);
    } finally {
      await Promise.all(sessions.map((c) => c.end().catch(() => {})));
    }
  });
});
