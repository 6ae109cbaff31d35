// Measurements of the list counters on the local PostgreSQL (numbers in bench/results/history.md, the
// decisions in docs/decisions/performance.md):
//
//   npx tsx bench/list-totals.ts contention   32 connections creating leads of ONE tenant, each in a
//                                             transaction of two round trips (the insert, then a second
//                                             statement, as the service's idempotency record), with the
//                                             counters spread over 1 slot (one hot row per key), 8 and 32
//                                             slots, and without the counter triggers at all
//   npx tsx bench/list-totals.ts explain      EXPLAIN ANALYZE of GET /leads on a 100,000-lead tenant (the
//                                             benchmark dataset): the first page and offset 50,000, with
//                                             the previous statement (count(*) + OFFSET) and with
//                                             routers/leads/list.ts's statement (counter + bucket seek)
//
// Each mode creates its own database on DATABASE_URL's server and drops it afterwards. Env:
// DATABASE_URL, LT_SECONDS (per contention run, default 8), LT_ROUNDS (default 2).
import pg from "pg";
import { Prisma } from "../generated/prisma/client.js";
import { openPostgres } from "../server/db/client.js";
import { migrate } from "../server/db/migrate.js";
import { listStatement, counted, countedRange, type Seek } from "../routers/_lib/totals.js";
import { createDataset, dropDataset } from "./dataset.js";
import { dbUrl } from "./config.js";

const base = process.env.DATABASE_URL || "postgresql://postgres@127.0.0.1:5432/postgres";
const seconds = Number(process.env.LT_SECONDS ?? 8);
const rounds = Number(process.env.LT_ROUNDS ?? 2);

async function freshDb(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  const url = dbUrl(base, name);
  const db = await openPostgres(url, { max: 2 });
  await migrate(db.sql);
  await db.close();
  return url;
}

const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

async function contention() {
  const name = "h13_list_totals_contention";
  const url = await freshDb(name);
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  const tenant = "00000000-0000-4000-8000-000000000013";
  const stage = "00000000-0000-4000-8000-000000000014";
  await setup.query(`INSERT INTO "Tenant" ("id", "name", "plan") VALUES ($1, 'contention', 'pro')`, [tenant]);
  await setup.query(
    `INSERT INTO "PipelineStage" ("id", "tenantId", "name", "defaultEntry") VALUES ($1, $2, 'New', true)`,
    [stage, tenant],
  );

  const slots = (n: number) =>
    `CREATE OR REPLACE FUNCTION "ListCounter_slots"() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT ${n} $$; ALTER TABLE "Lead" ENABLE TRIGGER "ListCounter_insert"`;
  const variants: { label: string; prepare: string }[] = [
    { label: "1 slot (one hot row per key)", prepare: slots(1) },
    { label: "8 slots", prepare: slots(8) },
    { label: "16 slots", prepare: slots(16) },
    { label: "32 slots", prepare: slots(32) },
    { label: "no counter triggers", prepare: `ALTER TABLE "Lead" DISABLE TRIGGER "ListCounter_insert"` },
  ];
  const results: Record<string, { tps: number[]; p50: number[]; p99: number[] }> = {};
  for (let round = 0; round < rounds; round++) {
    for (const v of variants) {
      await setup.query(v.prepare);
      const pool = new pg.Pool({ connectionString: url, max: 32 });
      const latencies: number[] = [];
      let done = 0;
      const until = Date.now() + seconds * 1000;
      await Promise.all(
        Array.from({ length: 32 }, async (_, w) => {
          const c = await pool.connect();
          try {
            while (Date.now() < until) {
              const t0 = performance.now();
              await c.query("BEGIN");
              await c.query(`INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1, $2, $3)`, [
                tenant,
                `w${w}`,
                stage,
              ]);
              await c.query(`SELECT 1`);
              await c.query("COMMIT");
              latencies.push(performance.now() - t0);
              done++;
            }
          } finally {
            c.release();
          }
        }),
      );
      await pool.end();
      latencies.sort((a, b) => a - b);
      const r = results[v.label] ?? { tps: [], p50: [], p99: [] };
      results[v.label] = r;
      r.tps.push(done / seconds);
      r.p50.push(pct(latencies, 50));
      r.p99.push(pct(latencies, 99));
    }
  }
  await setup.query(`ALTER TABLE "Lead" ENABLE TRIGGER "ListCounter_insert"`);
  const check = await setup.query(
    `SELECT (SELECT count(*) FROM "Lead")::int AS rows, (SELECT sum("n") FROM "ListCounter"
     WHERE "dim" = 'all')::int AS counted`,
  );
  await setup.end();
  await dropDataset(base, name);
  console.log(`32 connections, ${seconds} s per run, ${rounds} rounds (best round shown, all rounds in brackets)`);
  console.log("| counters | creates/s | p50 ms | p99 ms |\n|---|---:|---:|---:|");
  for (const [label, r] of Object.entries(results)) {
    const best = r.tps.indexOf(Math.max(...r.tps));
    console.log(
      `| ${label} | ${r.tps[best]!.toFixed(0)} [${r.tps.map((x) => x.toFixed(0)).join(", ")}] | ` +
        `${r.p50[best]!.toFixed(1)} | ${r.p99[best]!.toFixed(1)} |`,
    );
  }
  console.log(
    `(rows inserted with triggers off are not counted: rows ${check.rows[0].rows}, counted ${check.rows[0].counted})`,
  );
}

async function explain() {
  const name = "h13_list_totals_explain";
  const log = (s: string) => console.error(s);
  const ds = await createDataset({ pgBase: base, dbName: name, sizes: [100_000], matrixSize: 100_000, log });
  const c = new pg.Client({ connectionString: ds.url });
  await c.connect();
  const t = ds.big.id;
  // A bulk load lands in one slot; live traffic spreads every key over up to "ListCounter_slots"()
  // rows. Spread every counter of the tenant over SPREAD slots (sums unchanged): the readers' worst case.
  const spread = Number(process.env.LT_SPREAD ?? 32);
  await c.query(
    `WITH k AS (SELECT "tenantId", "entity", "dim", "value" FROM "ListCounter" WHERE "tenantId" = $1 AND "slot" = 0)
     INSERT INTO "ListCounter" ("tenantId", "entity", "dim", "value", "slot", "n")
     SELECT k.*, s, CASE WHEN s = 0 THEN -($2 - 1) ELSE 1 END FROM k, generate_series(0, $2 - 1) s
     ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO UPDATE SET "n" = "ListCounter"."n" + excluded."n"`,
    [t, spread],
  );
  await c.query(`VACUUM ANALYZE "ListCounter"`);
  const cols = `l."id", l."customerId", l."conversationId", l."customerName", l."customerEmail", l."customerPhone", l."intent",
    l."quality", l."stageId", l."budgetMin", l."budgetMax", l."zones", l."rooms", l."assignedOperatorId", l."source", l."notes",
    l."createdAt", l."updatedAt"`;
  const before = (offset: number) => ({
    text: `SELECT s."total", s."newest", p.* FROM (SELECT (SELECT count(*)::int FROM "Lead" WHERE "tenantId" = $1) AS "total",
             (SELECT max("createdAt") FROM "Lead" WHERE "tenantId" = $1) AS "newest") s
             LEFT JOIN LATERAL (SELECT ${cols} FROM (SELECT "id" FROM "Lead" WHERE "tenantId" = $1 ORDER BY "createdAt" DESC, "id" DESC
               LIMIT 50 OFFSET ${offset}) ids JOIN "Lead" l ON l."id" = ids."id") p ON true ORDER BY p."createdAt" DESC, p."id" DESC`,
    values: [t],
  });
  const after = (offset: number, dateFrom?: Date) => {
    const where = Prisma.sql`"tenantId" = ${t}::uuid
                             ${dateFrom ? Prisma.sql`AND "createdAt" >= ${dateFrom.toISOString()}::timestamptz` : Prisma.empty}`;
    const seek: Seek = { entity: "Lead", column: Prisma.sql`"createdAt"`, desc: true, lo: dateFrom };
    const sql = listStatement({
      tenantId: t,
      offset,
      total: dateFrom ? countedRange(t, seek) : counted(t, "Lead"),
      seek,
      extra: Prisma.sql`, (SELECT max("createdAt") FROM "Lead" WHERE ${where}) AS "newest"`,
      page: (at) => Prisma.sql`SELECT ${Prisma.raw(cols)} FROM (SELECT "id" FROM "Lead" WHERE ${where} AND ${at.where}
        ORDER BY "createdAt" DESC, "id" DESC LIMIT 50 OFFSET ${at.offset}) ids JOIN "Lead" l
          ON l."tenantId" = ${t}::uuid AND l."id" = ids."id"`,
      order: Prisma.sql`p."createdAt" DESC, p."id" DESC`,
    });
    return { text: sql.text, values: sql.values };
  };
  const runs: [string, { text: string; values: unknown[] }][] = [
    ["before, offset 0", before(0)],
    ["before, offset 50000", before(50000)],
    ["after, offset 0", after(0)],
    ["after, offset 50000", after(50000)],
    ["after, dateFrom 200 days ago, offset 20000", after(20000, new Date(ds.anchor.getTime() - 200 * 86_400_000))],
  ];
  const out: string[] = [];
  const jitDefault = (await c.query(`SHOW jit`)).rows[0].jit;
  for (const jit of [jitDefault, "off"]) {
    await c.query(`SET jit = ${jit}`);
    for (const [label, q] of runs) {
      const times: number[] = [];
      let plan = "";
      for (let i = 0; i < 7; i++) {
        const r = await c.query({ text: `EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, values: q.values });
        plan = r.rows.map((x: any) => x["QUERY PLAN"]).join("\n");
        times.push(Number(/Execution Time: ([\d.]+) ms/.exec(plan)![1]));
      }
      times.sort((a, b) => a - b);
      const buffers = /Buffers: ([^\n]+)/.exec(plan)?.[1] ?? "";
      out.push(`| ${label} | ${jit} | ${times[0]!.toFixed(2)} | ${pct(times, 50).toFixed(2)} | ${buffers} |`);
      console.error(`---- ${label} (jit ${jit})\n${plan}\n`);
    }
  }
  const same = await c.query(after(50000).text, after(50000).values);
  const old = await c.query(before(50000).text, before(50000).values);
  await c.end();
  await dropDataset(base, name);
  console.log(
    `100,000-lead tenant (bench/dataset.ts, loaded in ${ds.loadSeconds.toFixed(1)} s), every counter key ` +
      `spread over ${spread} slots, GET /leads?limit=50; 7 runs each`,
  );
  console.log("| statement | jit | min ms | median ms | top-level buffers |\n|---|---|---:|---:|---|");
  console.log(out.join("\n"));
  console.log(
    `offset 50000: identical ids before/after: ${JSON.stringify(same.rows.map((r) => r.id)) === JSON.stringify(old.rows.map((r) => r.id))}, totals ${old.rows[0].total} / ${same.rows[0].total}`,
  );
}

const mode = process.argv[2];
if (mode === "contention") await contention();
else if (mode === "explain") await explain();
else {
  console.error("usage: npx tsx bench/list-totals.ts contention|explain");
  process.exitCode = 2;
}
