// A write that changed no row is sent once more on a worker's pool (server/db/client.ts
// rerunEmptyWrites, in bootstrap.ts WORKER_POOL). Everywhere PostgreSQL runs: which statements are sent
// again (an UPDATE or DELETE that changed nothing), which are not, and nothing changes twice. On Citus
// the case it is for: a shard split (isolate_tenant_to_new_shard) committing while a write routed by
// Citus on the tenant's worker waits for the shard group's metadata lock; Citus reroutes the write to
// the new shard on the same node and runs it in the snapshot taken before the wait, where the split's
// rows are not: sent again, it updates the row.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres, type Database } from "../../server/db/client.js";
import { emptyWritesRerun, WORKER_POOL } from "../../server/bootstrap.js";
import { citusCluster, onSameDatabase } from "../helpers/cluster.js";
import { directBaseUrl, startApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const onPostgres = Boolean(process.env.DATABASE_URL);
const onCitus = onPostgres && (await citusCluster(directBaseUrl()!)) !== null;

let app: Awaited<ReturnType<typeof startApp>>;
let tenantId: string;
let key: string;

beforeAll(async () => {
  app = await startApp({ config: { databaseRouting: "coordinator" } });
  const ids = await app.load(fixture(tenant("acme")));
  tenantId = ids.tenants.acme!.id;
  key = ids.tenants.acme!.apiKeys.full!.key;
}, 120_000);
afterAll(() => app?.close());

async function newLead(name: string): Promise<string> {
  const res = await app.request("POST", "/public/v1/leads", { key, body: { customerName: name } });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe.runIf(onPostgres)("a worker pool sends an UPDATE or DELETE that changed no row once more", () => {
  it("no row changed: sent twice; a row changed, a SELECT, an INSERT: once; without the option: once; nothing changes twice", async () => {
    const sent: string[] = [];
    const observe = (sql: string) => void sent.push(sql.replace(/\s+/g, " ").slice(0, 40));
    const pools: Database[] = [];
    const open = async (rerun: boolean) => {
      const db = await openPostgres(app.testDb.directUrl!, {
        ...WORKER_POOL,
        rerunEmptyWrites: rerun,
        observe,
        max: 1,
      });
      pools.push(db);
      return db;
    };
    try {
      const worker = await open(true);
      const id = await newLead("Rerun");
      const none = `UPDATE "Lead" SET "customerName" = 'never' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`;
      const one = `UPDATE "Lead" SET "notes" = coalesce("notes", '') || 'x' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`;
      const count = async (sql: string, ...params: unknown[]) => {
        sent.length = 0;
        return worker.prisma.$executeRawUnsafe(sql, ...params);
      };
      expect(await count(none, tenantId, crypto.randomUUID())).toBe(0);
      expect(sent).toEqual([none.slice(0, 40), none.slice(0, 40)]);
      expect(await count(one, tenantId, id)).toBe(1);
      expect(sent).toHaveLength(1);
      expect(
        await count(
          `DELETE FROM "Lead" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
          tenantId,
          crypto.randomUUID(),
        ),
      ).toBe(0);
      expect(sent).toHaveLength(2);
      // Prisma's own statements: an updateMany with no match, inside a transaction too; an update of one row.
      sent.length = 0;
      expect(
        (
          await worker.prisma.lead.updateMany({
            where: { tenantId, id: crypto.randomUUID() },
            data: { customerName: "never" },
          })
        ).count,
      ).toBe(0);
      expect(sent.filter((s) => s.startsWith("UPDATE"))).toHaveLength(2);
      sent.length = 0;
      await worker.prisma.$transaction(async (tx) => {
        expect(
          (await tx.lead.updateMany({ where: { tenantId, id: crypto.randomUUID() }, data: { customerName: "never" } }))
            .count,
        ).toBe(0);
        expect((await tx.lead.updateMany({ where: { tenantId, id }, data: { notes: "once" } })).count).toBe(1);
      });
      expect(sent.filter((s) => s.startsWith("UPDATE"))).toHaveLength(3);
      sent.length = 0;
      expect(await worker.sql.query(`SELECT 1 AS n WHERE false`)).toEqual([]);
      expect(sent).toHaveLength(1);
      sent.length = 0;
      expect(
        await worker.prisma.$executeRawUnsafe(
          `INSERT INTO "Lead" ("tenantId", "customerName", "stageId") SELECT "tenantId", 'never', "stageId" FROM "Lead"
           WHERE "tenantId" = $1::uuid AND false`,
          tenantId,
        ),
      ).toBe(0);
      expect(sent).toHaveLength(1);
      // The row changed once: its notes are the transaction's, with no second 'x'.
      const [row] = await app.db.sql.query<{ notes: string }>(
        `SELECT "notes" FROM "Lead" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        [tenantId, id],
      );
      expect(row!.notes).toBe("once");
      // The coordinator's pool (no option): once.
      const plain = await open(false);
      sent.length = 0;
      expect(await plain.prisma.$executeRawUnsafe(none, tenantId, crypto.randomUUID())).toBe(0);
      expect(sent).toHaveLength(1);
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
  });
});

describe.runIf(onPostgres)("a worker pool runs at READ COMMITTED only (a rerun needs a new snapshot)", () => {
  it("its connections start at READ COMMITTED whatever the database's default; a transaction asking for another level fails loudly, nothing written", async () => {
    const admin = new pg.Client({ connectionString: app.testDb.directUrl });
    await admin.connect();
    const name = new URL(app.testDb.directUrl!).pathname.slice(1);
    await admin.query(`ALTER DATABASE ${name} SET default_transaction_isolation = 'repeatable read'`);
    const before = emptyWritesRerun.count;
    const worker = await openPostgres(app.testDb.directUrl!, { ...WORKER_POOL, max: 1 });
    const plain = await openPostgres(app.testDb.directUrl!, { max: 1 });
    try {
      expect(await plain.sql.query("SHOW transaction_isolation")).toEqual([
        { transaction_isolation: "repeatable read" },
      ]);
      expect(await worker.sql.query("SHOW transaction_isolation")).toEqual([
        { transaction_isolation: "read committed" },
      ]);
      const leads = await app.db.prisma.lead.count({ where: { tenantId } });
      await expect(
        worker.prisma.$transaction(
          async (tx) =>
            tx.lead.create({
              data: {
                tenantId,
                customerName: "RR",
                stageId: (await tx.pipelineStage.findFirstOrThrow({ where: { tenantId } })).id,
              },
            }),
          {
            isolationLevel: "RepeatableRead",
          },
        ),
      ).rejects.toThrow(/READ COMMITTED only/);
      await expect(worker.sql.session((c) => c.exec("BEGIN ISOLATION LEVEL SERIALIZABLE"))).rejects.toThrow(
        /READ COMMITTED only/,
      );
      expect(await app.db.prisma.lead.count({ where: { tenantId } })).toBe(leads);
      // A rerun is counted (/metrics).
      await worker.prisma.$executeRawUnsafe(
        `UPDATE "Lead" SET "notes" = 'never' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        tenantId,
        crypto.randomUUID(),
      );
      expect(emptyWritesRerun.count).toBe(before + 1);
    } finally {
      await worker.close();
      await plain.close();
      await admin.query(`ALTER DATABASE ${name} RESET default_transaction_isolation`);
      await admin.end();
    }
  });
});

describe.runIf(onCitus)(
  "on Citus: a split committing while a worker's write waits for the shard's metadata lock",
  () => {
    it("the write, rerouted to the new shard on the same node, changes the row (sent again in a new snapshot)", async () => {
      const admin = new pg.Client({ connectionString: app.testDb.directUrl });
      await admin.connect();
      const clients: pg.Client[] = [];
      let worker: Database | undefined;
      try {
        const id = await newLead("Split me");
        const [holder] = (
          await admin.query<{ host: string; port: number; anchor: string }>(
            `SELECT n.nodename AS host, n.nodeport AS port, p.shardid::text AS anchor
             FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
            WHERE p.shardid = get_shard_id_for_distribution_column('"Lead"', $1::uuid)`,
            [tenantId],
          )
        ).rows;
        const url = onSameDatabase(app.testDb.directUrl!, holder!);
        const connect = async () => {
          const c = new pg.Client({ connectionString: url });
          await c.connect();
          clients.push(c);
          return c;
        };
        const [gate, watch] = [await connect(), await connect()];
        worker = await openPostgres(url, { ...WORKER_POOL, max: 1 });
        await worker.sql.query("SELECT 1"); // its connection open before the wait is set up
        const waiting = async (n: number) => {
          for (let i = 0; i < 200; i++) {
            const { rows } = await watch.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'advisory'`,
            );
            if (rows[0]!.n >= n) return;
            await new Promise((r) => setTimeout(r, 50));
          }
          const { rows } = await watch.query(
            `SELECT pid, state, wait_event_type, wait_event, left(query, 80) AS q FROM pg_stat_activity
             WHERE datname = current_database()`,
          );
          throw new Error(`fewer than ${n} waits on the tenant's metadata lock: ${JSON.stringify(rows)}`);
        };
        // 1. A share lock on the shard group's metadata, as a write holds it: the split waits for it.
        await gate.query("BEGIN");
        await gate.query(`SELECT lock_shard_metadata(5, ARRAY[$1::bigint])`, [holder!.anchor]);
        const split = admin.query(
          `SELECT isolate_tenant_to_new_shard('"Lead"', $1::uuid, cascade_option => 'CASCADE',
           shard_transfer_mode => 'block_writes')::text AS id`,
          [tenantId],
        );
        await waiting(1);
        // 2. The worker pool's write: its snapshot now, then it waits behind the split's lock.
        // (A Prisma query runs when it is awaited or then()'d: started here.)
        const write = worker.prisma.lead
          .updateMany({ where: { tenantId, id }, data: { customerName: "Split and renamed" } })
          .then((r) => r);
        await waiting(2);
        // 3. The split goes on and commits; the write is rerouted to the tenant's new shard.
        await gate.query("COMMIT");
        const [
          {
            rows: [isolated],
          },
          updated,
        ] = await Promise.all([split, write]);
        expect(isolated!.id).not.toBe(holder!.anchor);
        expect(updated.count).toBe(1);
        const { rows } = await admin.query<{ name: string }>(
          `SELECT "customerName" AS name FROM "Lead" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
          [tenantId, id],
        );
        expect(rows).toEqual([{ name: "Split and renamed" }]);
      } finally {
        await worker?.close();
        await Promise.all(clients.map((c) => c.end()));
        await admin.end();
      }
    }, 60_000);
  },
);
