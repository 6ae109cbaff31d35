// Memory of the service for the largest list pages the bounds allow (every page
// has a byte budget; 4 concurrent worst-case requests keep the peak RSS within +150 MiB of idle):
//
//   npx tsx scripts/page-memory.ts [--tickets 200] [--clients 4] [--rounds 3] [--scenarios tickets,changes,messages]
//                                  [--statement-timeout-ms N] [--seed-only]
// (--seed-only: load the database, print its URL and keep it — for EXPLAIN ANALYZE by hand; drop it after.)
//
// On the local PostgreSQL (DATABASE_BASE, default postgresql://postgres@127.0.0.1:5432; a new database,
// dropped afterwards) it loads the demo tenant, then — through the database's own triggers, so every
// counter and the changes feed are as the API would leave them — `--tickets` tickets of one contact,
// each at every bound of a thread (500 comments, 150,000 characters) and of its subject (500
// characters), every character U+0001 (six bytes of JSON: ~980 KB a ticket, ~196 MB for 200), and 400
// messages of 4,096 × U+0001 (the API's bound of a message) on one conversation. Then it starts the
// compiled service (`npm start`'s command, built first when stale; scripts/ensure-build.ts), waits 3 s
// after /readyz, reads the idle RSS, and runs each scenario: `--clients` concurrent clients, each
// paging `--rounds` times through
//   tickets   GET /public/v1/tickets?customerId=…&limit=200 (offset += items.length until !hasNext)
//   changes   GET /public/v1/changes?types=ticket&limit=500 (following nextSince until !hasMore)
//   messages  GET /public/v1/conversations/{id}/messages?limit=200 (following nextCursor)
//   trpc-batch  one /trpc batch of 20 × leads.list?limit=100 over 50 leads of ~90 KB each (notes and
//             name of U+0001), the batch's one response within the budget
// sampling VmRSS every 20 ms. Prints one Markdown table: idle, peak, peak − idle, the largest body,
// pages, and the median and largest time of a page. Not a test: a measurement to run by hand.
import { execFileSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";
import { ensureBuild, serviceCommand } from "./ensure-build.js";
import { freePort, sleep, startService, stopService } from "./service-process.js";
import { openPostgres } from "../server/db/client.js";
import { migrate } from "../server/db/migrate.js";
import { loadFixture } from "../server/admin/fixture.js";
import { demoFixture } from "../server/admin/demo.js";
import { setTenantLimits } from "../server/admin/operations.js";
import { PAGE_BUDGET_BYTES } from "../routers/_lib/page-budget.js";

const argv = process.argv.slice(2);
const opt = (name: string, def: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] ? argv[i + 1]! : def;
};
const TICKETS = Number(opt("tickets", "200"));
const CLIENTS = Number(opt("clients", "4"));
const ROUNDS = Number(opt("rounds", "3"));
const SCENARIOS = opt("scenarios", "tickets,changes,messages,trpc-batch").split(",");
/** The service's DATABASE_STATEMENT_TIMEOUT_MS (its default, 5 s, when not given). */
const STATEMENT_TIMEOUT = opt("statement-timeout-ms", "");
const PG_BASE = process.env.DATABASE_BASE || "postgresql://postgres@127.0.0.1:5432";
const REDIS_URL = process.env.REDIS_URL || "redis://127.0.0.1:6379";

const rssMiB = (pid: number) =>
  Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;

interface Seeded {
  key: string;
  contactId: string;
  conversationId: string;
}

/** The demo tenant, its limits lifted, plus the worst-case tickets and messages (through the triggers). */
async function seed(url: string): Promise<Seeded> {
  const db = await openPostgres(url);
  try {
    await migrate(db.sql);
    const ids = await loadFixture(db, demoFixture());
    const demo = ids.tenants.demo!;
    await setTenantLimits(db, demo.id, "100000000", "1000000000");
    const started = Date.now();
    const [created] = await db.sql.query<{ ids: string[] }>(
      `WITH t AS (INSERT INTO "Ticket" ("tenantId", "subject", "createdById", "customerId", "createdAt")
                  SELECT $1::uuid, repeat(chr(1), 500), $2::uuid, $3::uuid, now() - i * interval '1 second'
                    FROM generate_series(1, $4::int) i
                  RETURNING "id")
       SELECT array_agg("id")::text[] AS ids FROM t`,
      [demo.id, demo.users.ana, demo.contacts.bea, TICKETS],
    );
    const tickets = created!.ids;
    // Every bound of a thread: 485 comments of 1 character, 14 of 10,000 and one of the rest
    // (150,000 characters in all, 500 comments), as test/db/ticket-threads.test.ts's worst case.
    const light = 485;
    const heavy = 14;
    const rest = 150_000 - light - heavy * 10_000;
    for (const [n, len] of [
      [light, 1],
      [heavy, 10_000],
      [1, rest],
    ] as const)
      await db.sql.query(
        `INSERT INTO "TicketComment" ("tenantId", "ticketId", "authorUserId", "body")
         SELECT $1::uuid, t.id, $2::uuid, repeat(chr(1), $4::int)
           FROM unnest($3::uuid[]) t(id), generate_series(1, $5::int)`,
        [demo.id, demo.users.ana, tickets, len, n],
      );
    const conversationId = demo.conversations.c1!;
    await db.sql.query(
      `INSERT INTO "Message" ("tenantId", "conversationId", "role", "content", "deliveryStatus", "createdAt")
       SELECT $1::uuid, $2::uuid, 'user', repeat(chr(1), 4096), 'received', now() - i * interval '1 second'
         FROM generate_series(1, 400) i`,
      [demo.id, conversationId],
    );
    // 50 leads of ~90 KB of JSON, as the review's: notes of 14,900 characters (written in SQL, past the
    // API's 10,000) and a name of 200, every one U+0001 (6 bytes of JSON).
    await db.sql.query(
      `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "notes")
       SELECT $1::uuid, repeat(chr(1), 200), $2::uuid, repeat(chr(1), 10000) || repeat(chr(1), 4900)
         FROM generate_series(1, 50)`,
      [demo.id, demo.stages.new],
    );
    process.stderr.write(
      `page-memory: ${TICKETS} worst-case tickets and 400 messages loaded in ` +
        `${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    );
    return { key: demo.apiKeys.demo!.key, contactId: demo.contacts.bea!, conversationId };
  } finally {
    await db.close();
  }
}

interface Pages {
  pages: number;
  items: number;
  maxBytes: number;
  ms: number[];
  failures: string[];
}

/** One client's walk through a scenario's pages. */
async function walk(base: string, key: string, seeded: Seeded, scenario: string, out: Pages): Promise<void> {
  let offset = 0;
  let since: string | undefined;
  let cursor: string | undefined;
  for (let n = 0; n < 10_000; n++) {
    const path =
      scenario === "tickets"
        ? `/public/v1/tickets?customerId=${seeded.contactId}&limit=200&offset=${offset}`
        : scenario === "changes"
          ? `/public/v1/changes?types=ticket&limit=500${since ? `&since=${since}` : ""}`
          : `/public/v1/conversations/${seeded.conversationId}/messages?limit=200${cursor ? `&cursor=${cursor}` : ""}`;
    const calls = Array(20).fill("leads.list").join(",");
    const input = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [String(i), { limit: 100 }]));
    const batch = `/trpc/${calls}?batch=1&input=${encodeURIComponent(JSON.stringify(input))}`;
    const t0 = performance.now();
    const res = await fetch(base + (scenario === "trpc-batch" ? batch : path), { headers: { "x-api-key": key } });
    const text = await res.text();
    out.ms.push(performance.now() - t0);
    out.pages++;
    const bytes = Buffer.byteLength(text);
    out.maxBytes = Math.max(out.maxBytes, bytes);
    if (res.status !== 200) {
      out.failures.push(`${scenario}: ${res.status} ${text.slice(0, 200)}`);
      return;
    }
    if (bytes > PAGE_BUDGET_BYTES) out.failures.push(`${scenario}: a body of ${bytes} bytes`);
    const body = JSON.parse(text);
    if (scenario === "trpc-batch") {
      out.items += (body as { result: { data: { items: unknown[] } } }[]).reduce(
        (n, r) => n + r.result.data.items.length,
        0,
      );
      return; // one batch a round
    }
    out.items += body.items.length;
    if (scenario === "tickets") {
      offset += body.items.length;
      if (!body.pagination.hasNext) return;
    } else if (scenario === "changes") {
      since = body.nextSince;
      if (!body.hasMore) return;
    } else {
      cursor = body.pagination.nextCursor;
      if (!body.pagination.hasMore) return;
    }
  }
  out.failures.push(`${scenario}: more than 10,000 pages`);
}

const name = `page_memory_${process.pid}_${Date.now()}`;
execFileSync("psql", [`${PG_BASE}/postgres`, "-qc", `CREATE DATABASE ${name}`]);
const url = `${PG_BASE}/${name}`;
let child: ChildProcess | undefined;
try {
  const seeded = await seed(url);
  if (argv.includes("--seed-only")) {
    process.stdout.write(`${url} ${JSON.stringify(seeded)}\n`);
    process.exit(0);
  }
  await ensureBuild();
  const port = await freePort();
  child = await startService(
    serviceCommand(),
    {
      DATABASE_URL: url,
      REDIS_URL,
      ...(STATEMENT_TIMEOUT ? { DATABASE_STATEMENT_TIMEOUT_MS: STATEMENT_TIMEOUT } : {}),
    },
    port,
  );
  await sleep(3000);
  const pid = child.pid!;
  const idle = rssMiB(pid);
  const rows: string[] = [];
  for (const scenario of SCENARIOS) {
    const out: Pages = { pages: 0, items: 0, maxBytes: 0, ms: [], failures: [] };
    let peak = rssMiB(pid);
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 20);
    const started = Date.now();
    for (let round = 0; round < ROUNDS; round++)
      await Promise.all(
        Array.from({ length: CLIENTS }, () => walk(`http://127.0.0.1:${port}`, seeded.key, seeded, scenario, out)),
      );
    clearInterval(sampler);
    peak = Math.max(peak, rssMiB(pid));
    const ms = out.ms.sort((a, b) => a - b);
    const cells = [
      scenario,
      idle.toFixed(0),
      peak.toFixed(0),
      (peak - idle).toFixed(0),
      (out.maxBytes / 1048576).toFixed(2),
      `${out.pages} (${out.items} items)`,
      `${ms[Math.floor(ms.length / 2)]!.toFixed(0)} / ${ms[ms.length - 1]!.toFixed(0)}`,
      ((Date.now() - started) / 1000).toFixed(1),
      out.failures.length ? out.failures.slice(0, 3).join("; ") : "none",
    ];
    rows.push(`| ${cells.join(" | ")} |`);
    await sleep(1000);
  }
  process.stdout.write(
    [
      [
        `Node ${process.version}, ${os.cpus().length} cores; PostgreSQL;`,
        `${TICKETS} tickets at every thread bound (U+0001), 400 messages of 4,096 × U+0001;`,
        `${CLIENTS} concurrent clients × ${ROUNDS} walks through every page; budget ${PAGE_BUDGET_BYTES} bytes`,
      ].join(" "),
      "",
      "| scenario | idle RSS MiB | peak RSS MiB | peak − idle MiB | largest body MiB | pages (items) | page ms " +
        "median / max | seconds | failures |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---|",
      ...rows,
      "",
    ].join("\n"),
  );
} finally {
  if (child) await stopService(child);
  execFileSync("psql", [`${PG_BASE}/postgres`, "-qc", `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`]);
}
