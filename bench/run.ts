// `npm run bench`: the benchmark, end to end.
//   1. a fresh database on the local PostgreSQL (migrated by the project's migrator) with the dataset
//   2. the service (the compiled bundle `npm start` runs, production settings) and the raw
//      baseline (bench/baseline/server.ts) as child processes
//   3. per scenario: database round trips per request (sequential requests, statement counter),
//      a warm-up, then autocannon over loopback at each connection count (service, then baseline
//      where there is one, back to back so that both see the same machine load)
//   4. bench/results/<date>.md (+ .json with the raw numbers)
// Settings: see bench/config.ts and bench/README.md.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import pg from "pg";
import { benchConfig as cfg } from "./config.js";
import { createDataset, dropDataset, reuseDataset, uidJs, type BenchTenant, type Dataset } from "./dataset.js";
import { cpuSeconds, memory, rssSampler, serviceCommand, startProcess, waitReady, type Proc } from "./proc.js";
import { profileMarkdown } from "./profile.js";
import { percentiles } from "./latency.js";
import { buildScenarios, type Prepared, type Req, type Scenario } from "./scenarios.js";
import { encodeSince } from "../routers/changes/schemas.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const started = Date.now();
const log = (s: string) =>
  process.stdout.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);
const runId = new Date()
  .toISOString()
  .replace(/[-:.TZ]/g, "")
  .slice(0, 14);

export interface Run {
  /** "paired-single": a batch's one-object scenario, run just before and just after the batch at 1 connection. */
  target: "service" | "baseline" | "baseline-no-count" | "paired-single";
  connections: number;
  requests: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statuses: Record<string, number>;
  rssMaxMiB: number;
  cpuMsPerReq: number;
  dbCpuMsPerReq: number;
  roundTripsPerReq: number;
  /** A scenario with a tally: the objects its answers created, and the ones they did not. */
  itemsCreated?: number;
  itemsFailed?: number;
}

/**
 * Two runs of one scenario as one: counts summed, per-request costs over all requests, rates averaged, tails the worse.
 */
export function combineRuns<R extends Omit<Run, "target">>(a: R, b: R): R {
  const n = a.requests + b.requests;
  const per = (x: number, y: number) => (n ? (x * a.requests + y * b.requests) / n : NaN);
  const statuses = { ...a.statuses };
  for (const [k, v] of Object.entries(b.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  return {
    ...a,
    requests: n,
    rps: (a.rps + b.rps) / 2,
    p50: per(a.p50, b.p50),
    p90: Math.max(a.p90, b.p90),
    p99: Math.max(a.p99, b.p99),
    max: Math.max(a.max, b.max),
    non2xx: a.non2xx + b.non2xx,
    errors: a.errors + b.errors,
    timeouts: a.timeouts + b.timeouts,
    statuses,
    rssMaxMiB: Math.max(a.rssMaxMiB, b.rssMaxMiB),
    cpuMsPerReq: per(a.cpuMsPerReq, b.cpuMsPerReq),
    dbCpuMsPerReq: per(a.dbCpuMsPerReq, b.dbCpuMsPerReq),
    roundTripsPerReq: per(a.roundTripsPerReq, b.roundTripsPerReq),
    ...(a.itemsCreated !== undefined || b.itemsCreated !== undefined
      ? {
          itemsCreated: (a.itemsCreated ?? 0) + (b.itemsCreated ?? 0),
          itemsFailed: (a.itemsFailed ?? 0) + (b.itemsFailed ?? 0),
        }
      : {}),
  };
}

export interface ScenarioResult {
  name: string;
  title: string;
  roundTrips: { service: number; baseline?: number };
  countStatuses: Record<string, number>;
  runs: Run[];
  /** Objects written per request (a batch), and the one-object scenario it is compared with. */
  items?: number;
  batchOf?: { single: string; factor: number };
  /** Its service CPU per request against another scenario's (bench/scenarios.ts `cpuOf`). */
  cpuOf?: { scenario: string; factor: number };
}

// ---- environment -------------------------------------------------------------------------------

export async function versions(pgUrl = cfg.pgBase) {
  const c = new pg.Client({ connectionString: pgUrl });
  await c.connect();
  const pgv = (await c.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
  const settings = (
    await c.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers','max_connections','jit',
       'max_parallel_workers_per_gather','work_mem')`,
    )
  ).rows;
  await c.end();
  const r = new Redis(cfg.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  const info = await r.info("server");
  r.disconnect();
  const cpuModel = /model name\s*:\s*(.+)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "unknown";
  const pkg = (name: string) => {
    try {
      return JSON.parse(readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version as string;
    } catch {
      return "?";
    }
  };
  return {
    node: process.version,
    postgres: pgv,
    pgSettings: Object.fromEntries(settings.map((s) => [s.name, s.setting])),
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? "?",
    cores: os.cpus().length,
    cpuModel,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    prisma: pkg("@prisma/client"),
    express: pkg("express"),
    autocannon: pkg("autocannon"),
    kernel: os.release(),
  };
}

// ---- the report (this runner's and bench/citus.ts's) ---------------------------------------------

/**
 * The report meta both runners write (here and bench/citus.ts), in their order: the run, the machine,
 * the dataset `ds` (whose load figures a runner may replace) and the load settings.
 */
export function commonReportFields(o: {
  date: string;
  runId: string;
  started: number;
  versions: Awaited<ReturnType<typeof versions>>;
  loadStart: number;
  ds: Dataset;
  serviceLabel: string;
}) {
  return {
    date: o.date,
    label: process.env.BENCH_LABEL,
    runId: o.runId,
    elapsedSeconds: (Date.now() - o.started) / 1000,
    versions: o.versions,
    loadStart: o.loadStart,
    loadEnd: os.loadavg()[0]!,
    loadSeconds: o.ds.loadSeconds,
    phases: o.ds.phases,
    rows: o.ds.rows,
    tenants: o.ds.sized.map((t) => ({ label: t.label, size: t.size })),
    sizeLabels: o.ds.sized.map((t) => t.label),
    matrixLabel: o.ds.big.label,
    sizeDuration: cfg.sizeDuration,
    sizeConnections: cfg.sizeConnections,
    duration: cfg.duration,
    warmup: cfg.warmup,
    countRequests: cfg.countRequests,
    connections: cfg.connections,
    serviceLabel: o.serviceLabel,
  };
}

/** Writes the Markdown report to `out`; hand-written notes below the marker survive a re-run on the same day. */
export function writeReport(out: string, markdown: string): void {
  const MARK = "<!-- notes: hand-written below this line, kept by re-runs -->";
  const previous = existsSync(out) ? readFileSync(out, "utf8") : "";
  const notes = previous.includes(MARK) ? previous.slice(previous.indexOf(MARK)) : `${MARK}\n`;
  writeFileSync(out, `${markdown}\n${notes}`);
}

// ---- database CPU (all backends of the benchmark database) --------------------------------------

async function dbCpuProbe(url: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const snapshot = async () => {
    const rows = (
      await c.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
         AND backend_type = 'client backend'`,
      )
    ).rows;
    return new Map(rows.map((r) => [r.pid, cpuSeconds(r.pid)]));
  };
  return {
    snapshot,
    /** CPU seconds spent by backends between two snapshots (new backends count from zero). */
    delta(a: Map<number, number>, b: Map<number, number>) {
      let s = 0;
      for (const [pid, v] of b) s += v - (a.get(pid) ?? 0);
      return s;
    },
    close: () => c.end(),
  };
}

// ---- requests --------------------------------------------------------------------------------------

function headersFor(key: string, r: Req, extra: Record<string, string> = {}): Record<string, string> {
  return {
    "x-api-key": key,
    ...(r.body !== undefined ? { "content-type": "application/json" } : {}),
    ...(r.idempotencyKey ? { "idempotency-key": r.idempotencyKey } : {}),
    ...extra,
  };
}

export async function send(target: Proc, key: string, r: Req, extra?: Record<string, string>) {
  const res = await fetch(target.url + r.path, { method: r.method, headers: headersFor(key, r, extra), body: r.body });
  const text = await res.text();
  return { status: res.status, text };
}

/**
 * Waits until the server has finished the requests a previous run left in flight (its statement count stands still).
 */
async function settle(target: Proc): Promise<number> {
  let last = await target.queries();
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 300));
    const now = await target.queries();
    if (now === last) return now;
    last = now;
  }
  return last;
}

export async function countRoundTrips(target: Proc, key: string, sc: Scenario, n: number) {
  const statuses: Record<string, number> = {};
  let sample = "";
  const q0 = await settle(target);
  for (let i = 0; i < n; i++) {
    const r = await send(target, key, sc.next());
    statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    if (r.status >= 300 && !sample) sample = r.text.slice(0, 300);
  }
  const q1 = await target.queries();
  if (sample) log(`  ${target.name} ${sc.name}: non-2xx during the count: ${sample}`);
  return { perRequest: (q1 - q0) / n, statuses };
}

export async function load(
  target: Proc,
  key: string,
  sc: Scenario,
  connections: number,
  duration: number,
  db: Awaited<ReturnType<typeof dbCpuProbe>> | undefined,
  extra?: Record<string, string>,
): Promise<Omit<Run, "target">> {
  const q0 = await settle(target);
  const rss = rssSampler(target.pid);
  const cpu0 = cpuSeconds(target.pid);
  const db0 = await db?.snapshot();
  // Latency percentiles from every 2xx response's own time (autocannon's `response` event carries
  // it in fractional milliseconds from hrtime); autocannon's summary keeps whole milliseconds, which
  // turns a 0.4 vs 0.9 ms comparison into "0 vs 1" (docs/decisions/benchmark.md, "Latency at
  // microsecond resolution"). One float per response: at most a few hundred thousand per run.
  const latencies: number[] = [];
  const items = sc.tally ? { created: 0, failed: 0 } : undefined;
  const tally = sc.tally;
  const tracker = autocannon({
    url: target.url,
    connections,
    duration,
    pipelining: 1,
    timeout: 30,
    requests: [
      {
        setupRequest: (req: any) => {
          const r = sc.next();
          return { ...req, method: r.method, path: r.path, body: r.body, headers: headersFor(key, r, extra) };
        },
        ...(tally && items
          ? {
              onResponse: (status: number, body: string) => {
                const t = tally(status, body);
                items.created += t.created;
                items.failed += t.failed;
              },
            }
          : {}),
      },
    ],
  } as autocannon.Options);
  (tracker as unknown as NodeJS.EventEmitter).on("response", (_c: unknown, status: number, _b: number, ms: number) => {
    if (status >= 200 && status < 300) latencies.push(ms);
  });
  const result = await tracker;
  const lat = percentiles(latencies);
  // Requests still in flight when autocannon stops are finished (and charged to this run).
  const q1 = await settle(target);
  const cpu1 = cpuSeconds(target.pid);
  const db1 = await db?.snapshot();
  const requests = result.requests.total;
  // Per-request costs are divided by what was sent: requests still in flight at the end were finished too.
  const sent = Math.max(requests, (result.requests as { sent?: number }).sent ?? 0);
  const statuses: Record<string, number> = {};
  for (const [code, v] of Object.entries(result.statusCodeStats ?? {}))
    statuses[code] = (v as { count?: number }).count ?? 0;
  return {
    connections,
    requests,
    rps: requests / result.duration,
    ...lat,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statuses,
    rssMaxMiB: rss.stop(),
    // No request finished: no cost per request (NaN, shown as "–"), rather than a flattering 0.
    cpuMsPerReq: sent ? ((cpu1 - cpu0) * 1000) / sent : NaN,
    dbCpuMsPerReq: sent && db0 && db1 && db ? (db.delta(db0, db1) * 1000) / sent : NaN,
    roundTripsPerReq: sent ? (q1 - q0) / sent : NaN,
    ...(items ? { itemsCreated: items.created, itemsFailed: items.failed } : {}),
  };
}

// ---- preparation and sanity -----------------------------------------------------------------------

export async function prepare(service: Proc, ds: Dataset, tenant: BenchTenant): Promise<Prepared> {
  const messageCursors = new Map<string, string>();
  // Every conversation has 50 messages, so a limit=50 first page has no second page: the cursors are
  // taken after the 25 newest messages (the second page then holds the 25 older ones).
  for (const c of tenant.conversationIds.slice(0, 20)) {
    const r = await send(service, tenant.key, {
      method: "GET",
      path: `/public/v1/conversations/${c}/messages?limit=25`,
    });
    if (r.status !== 200) throw new Error(`messages of ${c}: ${r.status} ${r.text.slice(0, 300)}`);
    const cursor = JSON.parse(r.text).pagination?.nextCursor;
    if (cursor) messageCursors.set(c, cursor);
  }
  // Before the feed tokens: giving contacts an external id writes changes to the tenant's feed.
  const externalContacts = await externalIdContacts(ds, tenant);
  const longTickets = await longThreadTickets(ds, tenant);
  const changes = await changesTokens(ds, tenant);
  // Contacts with leads: every third lead i links contact (i mod contacts), so contacts 0, 3, 6, ….
  const leadContacts = await Promise.all(
    Array.from({ length: Math.min(50, Math.floor(tenant.size.contacts / 3)) }, (_, k) =>
      uidJs(tenant.index, "contact", 3 * k),
    ),
  );
  const leadCursors: string[] = [];
  for (let k = 0; k < 5; k++) {
    const offset = Math.floor(tenant.size.leads / 2) + k * 50;
    const r = await send(service, tenant.key, { method: "GET", path: `/public/v1/leads?offset=${offset}&limit=50` });
    const cursor = r.status === 200 ? JSON.parse(r.text).nextCursor : undefined;
    if (!cursor) throw new Error(`leads at ${offset}: no nextCursor (${r.status} ${r.text.slice(0, 300)})`);
    leadCursors.push(cursor);
  }
  return { messageCursors, changes, leadContacts, externalContacts, longTickets, leadCursors };
}

/**
 * 100 tickets of one contact of their own (`bench-long-threads`), external ids `bench-long-<k>`, each
 * with 15 comments of 3,000 characters (~45 KB of JSON a ticket): the ticket batch over long threads
 * and the list page over the same tickets. Written through the triggers (the thread counters), once:
 * a reused database keeps them.
 */
async function longThreadTickets(ds: Dataset, tenant: BenchTenant): Promise<Prepared["longTickets"]> {
  const c = new pg.Client({ connectionString: ds.url });
  await c.connect();
  try {
    const contactId = await uidJs(tenant.index, "long-contact", 0);
    const items = Array.from({ length: 100 }, (_, k) => ({
      externalId: `bench-long-${k}`,
      subject: `Long thread ${k}`,
    }));
    const { rows } = await c.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Ticket" WHERE "tenantId" = $1::uuid AND "customerId" = $2::uuid`,
      [tenant.id, contactId],
    );
    if (rows[0]!.n === 100) return { contactId, items };
    await c.query("BEGIN");
    await c.query(
      `INSERT INTO "Contact" ("id", "tenantId", "fullName", "phone", "origin", "createdAt", "updatedAt")
       VALUES ($2::uuid, $1::uuid, 'Bench long threads', '+34799999999', 'api', now(), now()) ON CONFLICT DO NOTHING`,
      [tenant.id, contactId],
    );
    const owner = tenant.userIds[0]!;
    const tickets = await c.query<{ id: string }>(
      `INSERT INTO "Ticket" ("tenantId", "subject", "createdById", "customerId", "externalId", "createdAt", "updatedAt")
       SELECT $1::uuid, 'Long thread ' || k, $2::uuid, $3::uuid, 'bench-long-' || k, now() - k * interval '1 second',
         now() - k * interval '1 second'
         FROM generate_series(0, 99) k RETURNING "id"`,
      [tenant.id, owner, contactId],
    );
    await c.query(
      `INSERT INTO "TicketComment" ("tenantId", "ticketId", "authorUserId", "body", "createdAt")
       SELECT $1::uuid, t.id, $2::uuid, substr(repeat(md5(t.id::text || i), 94), 1, 3000),
         now() - interval '1 day' + i * interval '1 millisecond'
         FROM unnest($3::uuid[]) t(id), generate_series(1, 15) i`,
      [tenant.id, owner, tickets.rows.map((t) => t.id)],
    );
    await c.query("COMMIT");
    return { contactId, items };
  } finally {
    await c.end();
  }
}

/**
 * The first 1,000 contacts of the tenant (the live ones: contact k is soft-deleted when
 * k mod 100 = 99) hold the external id `bench-contact-<k>` — the update path of PUT
 * /contacts/by-external-id. Set here with one statement (the loaded dataset has no external ids; a
 * reused database already has them and nothing is written), read back with the stored phones.
 */
async function externalIdContacts(ds: Dataset, tenant: BenchTenant): Promise<Prepared["externalContacts"]> {
  const c = new pg.Client({ connectionString: ds.url });
  await c.connect();
  try {
    const n = Math.min(1000, tenant.size.contacts);
    await c.query(
      `UPDATE "Contact" x SET "externalId" = 'bench-contact-' || k
         FROM generate_series(0, $2::int - 1) k
        WHERE x."tenantId" = $1::uuid AND x."id" = md5($3::text || k)::uuid AND k % 100 <> 99
          AND x."externalId" IS DISTINCT FROM 'bench-contact-' || k`,
      [tenant.id, n, `${tenant.index}:contact:`],
    );
    const { rows } = await c.query<{ externalId: string; phone: string }>(
      `SELECT "externalId", "phone" FROM "Contact" WHERE "tenantId" = $1::uuid AND "externalId" LIKE 'bench-contact-%'
       AND "deletedAt" IS NULL ORDER BY "createdAt" DESC, "id"`,
      [tenant.id],
    );
    return rows;
  } finally {
    await c.end();
  }
}

/**
 * Changes feed tokens of the tenant, made directly from its head: the head itself (a
 * caught-up poll: nothing new) and 50 positions spread over it. Waits until the tenant has no change
 * still to be placed (the service's sequencer places them within a second), so that the head is the
 * feed's end. Taken again after the answer check, whose creates add changes to the tenant's feed: a
 * token taken before them would not be caught up.
 */
export async function changesTokens(ds: Dataset, tenant: BenchTenant): Promise<Prepared["changes"]> {
  const c = new pg.Client({ connectionString: ds.url });
  await c.connect();
  try {
    for (let i = 0; i < 100; i++) {
      const pending = (
        await c.query<{ p: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM "ChangeLog" WHERE "tenantId" = $1 AND "pos" IS NULL) AS "p"`,
          [tenant.id],
        )
      ).rows[0]?.p;
      if (!pending) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const head = Number(
      (await c.query<{ pos: string }>(`SELECT "pos"::text FROM "ChangeHead" WHERE "tenantId" = $1`, [tenant.id]))
        .rows[0]?.pos ?? 0,
    );
    if (head < 1000) throw new Error(`the ${tenant.label} tenant's changes feed holds ${head} positions`);
    const token = (pos: number) => encodeSince(tenant.id, { pos, skip: 0, at: Date.now() });
    return {
      caughtUp: token(head),
      pages: Array.from({ length: 50 }, (_, k) => token(Math.floor((k * (head - 500)) / 50))),
    };
  } finally {
    await c.end();
  }
}

/** A body without what differs between two creations of the same thing (ids, clocks, the slot). */
export function comparable(text: string, ignore: string[]): string {
  const drop = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(drop)
      : v && typeof v === "object"
        ? Object.fromEntries(
            Object.entries(v)
              .filter(([k]) => !ignore.includes(k))
              .map(([k, x]) => [k, drop(x)]),
          )
        : v;
  try {
    return JSON.stringify(drop(JSON.parse(text)));
  } catch {
    return text;
  }
}

/**
 * The baseline must answer exactly what the service answers (else the ratio compares different work):
 * for every scenario it covers, status and body — GETs byte for byte (as JSON), POSTs but for the
 * created row's id and clocks (and an appointment's slot: two creations cannot share one).
 */
async function sameAnswers(
  service: Proc,
  baseline: Proc,
  key: string,
  scenarios: Scenario[],
): Promise<{ checked: string[]; problems: string[] }> {
  const problems: string[] = [];
  const checked: string[] = [];
  const compare = (
    name: string,
    a: { status: number; text: string },
    b: { status: number; text: string },
    ignore: string[],
  ) => {
    if (a.status !== b.status)
      problems.push(
        `${name}: service ${a.status}, baseline ${b.status} (${a.text.slice(0, 200)} | ${b.text.slice(0, 200)})`,
      );
    else if (comparable(a.text, ignore) !== comparable(b.text, ignore)) {
      const x = comparable(a.text, ignore);
      const y = comparable(b.text, ignore);
      let i = 0;
      while (i < x.length && x[i] === y[i]) i++;
      problems.push(
        `${name}: bodies differ at ${i}: service …${x.slice(Math.max(0, i - 60), i + 80)}… baseline ` +
          `…${y.slice(Math.max(0, i - 60), i + 80)}…`,
      );
    }
  };
  for (const sc of scenarios.filter((x) => x.baseline)) {
    checked.push(sc.name);
    if (sc.name === "put-contacts") {
      // An update of one contact, by one side; then the same request to the other, which finds nothing
      // to change (the unchanged path: 200, the same object, the same version) — and the other way
      // round. Each side's update must answer exactly what the other's unchanged path answers.
      for (const [first, second] of [
        [service, baseline],
        [baseline, service],
      ] as const) {
        const r = sc.next();
        const a = await send(first, sc.key ?? key, r);
        const b = await send(second, sc.key ?? key, r);
        const [sa, sb] = first === service ? [a, b] : [b, a];
        compare(`${sc.name} (${first.name} updates)`, sa, sb, []);
      }
      continue;
    }
    const ra = sc.next();
    // The same lead body twice (its own Idempotency-Key each); an appointment needs another slot, and
    // a batch of new contacts other contacts (other external ids, names, phones and emails).
    const other = sc.name === "post-appointments" || sc.items;
    const rb = other ? sc.next() : sc.write ? { ...ra, idempotencyKey: `${ra.idempotencyKey}-baseline` } : ra;
    const a = await send(service, sc.key ?? key, ra);
    const b = await send(baseline, sc.key ?? key, rb);
    // A list's stableBefore is the clock's and its nextCursor the service's own encoding: by design.
    const ignore = !sc.write
      ? ["stableBefore", "nextCursor"]
      : sc.name === "post-appointments"
        ? ["id", "createdAt", "updatedAt", "startsAt", "endsAt", "title", "assignedUserId"]
        : sc.items
          ? ["id", "createdAt", "updatedAt", "externalId", "fullName", "phone", "email"]
          : ["id", "createdAt", "updatedAt"];
    compare(sc.name, a, b, ignore);
  }
  return { checked, problems };
}

// ---- report ---------------------------------------------------------------------------------------

const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "–");
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "–");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "–");
const pf = (ok: boolean | undefined) => (ok === undefined ? "–" : ok ? "**PASS**" : "**FAIL**");

export interface GrowthRow {
  name: string;
  title: string;
  /** Per size label: the service's run on that tenant. */
  bySize: Record<string, Omit<Run, "target">>;
  roundTrips: Record<string, number>;
}

/** The benchmark's criteria, each with its measured value and PASS/FAIL. */
function targets(meta: Record<string, any>, results: ScenarioResult[], growth: GrowthRow[]) {
  const T: { criterion: string; measured: string; ok: boolean | undefined }[] = [];
  const sizes: string[] = meta.sizeLabels;
  const lo = sizes[0];
  const hi = sizes[sizes.length - 1];
  if (lo && hi && lo !== hi) {
    for (const g of growth) {
      const a = g.bySize[lo]?.dbCpuMsPerReq ?? NaN;
      const b = g.bySize[hi]?.dbCpuMsPerReq ?? NaN;
      // Below 0.05 ms/request the backends' CPU is within the clock's resolution: flat by any measure.
      const ok = Number.isFinite(a) && Number.isFinite(b) ? b <= 1.5 * a || b < 0.05 : undefined;
      T.push({
        criterion: `${g.title}: database ms/request at ${hi} ≤ 1.5× at ${lo}`,
        measured: `${f2(b)} vs ${f2(a)} ms (${f2(b / a)}×)`,
        ok,
      });
    }
  }
  const run = (s: ScenarioResult, t: Run["target"], c: number) =>
    s.runs.find((r) => r.target === t && r.connections === c);
  // (A batch's baseline is reported in its own table: its target is set against single creates.)
  for (const s of results.filter((x) => !x.items && x.runs.some((r) => r.target === "baseline"))) {
    const isList = s.title.startsWith("GET") && s.name !== "me";
    const need = s.name === "me" || isList ? 0.8 : 0.7;
    for (const c of meta.connections as number[]) {
      const a = run(s, "service", c);
      const b = run(s, "baseline", c);
      if (!a || !b) continue;
      // A run with failed requests (either side) measures something else: it cannot pass.
      const clean = a.non2xx + a.errors + b.non2xx + b.errors === 0;
      const dirty = clean ? "" : ` (non-2xx/errors: service ${a.non2xx}/${a.errors}, baseline ${b.non2xx}/${b.errors})`;
      T.push({
        criterion: `${s.title} @${c}: req/s ≥ ${need} of baseline`,
        measured: f2(a.rps / b.rps) + dirty,
        ok: clean && a.rps / b.rps >= need,
      });
      T.push({
        criterion: `${s.title} @${c}: p99 ≤ 1.5× baseline p99`,
        measured: `${f2(a.p99)} vs ${f2(b.p99)} ms (${f2(a.p99 / b.p99)}×)${dirty}`,
        ok: clean && a.p99 <= 1.5 * b.p99,
      });
      const nc = run(s, "baseline-no-count", c);
      if (s.name === "leads" && nc)
        T.push({
          criterion: `GET /leads with exact totals @${c}: ≥ 0.7 of the baseline without count`,
          measured: f2(a.rps / nc.rps),
          ok: a.non2xx + nc.non2xx === 0 && a.rps / nc.rps >= 0.7,
        });
    }
  }
  // A batch's objects per second at 1 connection against the one-object creates' requests
  // per second at 1 connection, both the service's, in the same run (and every object sent created).
  for (const s of results.filter((x) => x.items && x.batchOf)) {
    const single = results.find((x) => x.name === s.batchOf!.single);
    const a = run(s, "service", 1);
    const b = single && run(single, "service", 1);
    const what = `${s.title} @1: items/s ≥ ${s.batchOf!.factor}× ${single?.title ?? s.batchOf!.single} req/s @1`;
    if (!a || !b) {
      T.push({ criterion: what, measured: `not measured (needs both scenarios at 1 connection)`, ok: undefined });
      continue;
    }
    const perSec = a.rps * s.items!;
    // The one-object rate: the mean of its runs just before and after the batch (paired), else its own run.
    const pairs = s.runs.filter((x) => x.target === "paired-single");
    const singles = pairs.length ? pairs : [b];
    const oneRps = singles.reduce((t, r) => t + r.rps, 0) / singles.length;
    const ratio = perSec / oneRps;
    const problems = [
      ...([[s.name, a], ...singles.map((r) => [single!.name, r] as const)] as const).flatMap(([n, r]) =>
        r.itemsFailed ? [`${n}: ${r.itemsFailed} of ${(r.itemsCreated ?? 0) + r.itemsFailed} objects not created`] : [],
      ),
    ];
    const bad = (r: Run) => r.non2xx + r.errors;
    if ([a, b, ...pairs].some((r) => bad(r) > 0))
      problems.push(
        `non-2xx/errors: batch ${a.non2xx}/${a.errors}, single ` +
          `${singles.map((r) => `${r.non2xx}/${r.errors}`).join(", ")}`,
      );
    const how = pairs.length
      ? `paired: ${pairs.map((r) => f0(r.rps)).join(" and ")} creates/s just before and after; its own run ` +
        `${f0(b.rps)} creates/s gives ${f1(perSec / b.rps)}×`
      : "its own run";
    T.push({
      criterion: what,
      measured:
        `${f0(perSec)} items/s (${f1(a.rps)} batches/s) vs ${f0(oneRps)} creates/s: ${f1(ratio)}× ` +
        `(${how})${problems.length ? ` (${problems.join("; ")})` : ""}`,
      ok: problems.length === 0 && ratio >= s.batchOf!.factor,
    });
  }
  // A scenario whose work is bounded like another's: its service CPU per request at 1 connection.
  for (const s of results.filter((x) => x.cpuOf)) {
    const other = results.find((x) => x.name === s.cpuOf!.scenario);
    const a = run(s, "service", 1);
    const b = other && run(other, "service", 1);
    const what = `${s.title} @1: service CPU ms/req ≤ ${s.cpuOf!.factor}× ${other?.title ?? s.cpuOf!.scenario}`;
    if (!a || !b) {
      T.push({ criterion: what, measured: "not measured (needs both scenarios at 1 connection)", ok: undefined });
      continue;
    }
    const clean = a.non2xx + a.errors + b.non2xx + b.errors === 0;
    T.push({
      criterion: what,
      measured:
        `${f2(a.cpuMsPerReq)} vs ${f2(b.cpuMsPerReq)} ms ` +
        `(${f2(a.cpuMsPerReq / b.cpuMsPerReq)}×)${clean ? "" : " (non-2xx/errors)"}`,
      ok: clean && a.cpuMsPerReq <= s.cpuOf!.factor * b.cpuMsPerReq,
    });
  }
  T.push({
    criterion: `Service peak RSS under the ${Math.max(...(meta.connections as number[]))}-connection runs ≤ 200 MiB`,
    measured: `${f0(meta.servicePeak32)} MiB`,
    ok: meta.servicePeak32 <= 200,
  });
  T.push({
    criterion: "Service RSS idle after start ≤ 120 MiB",
    measured: `${f0(meta.startupRss.service)} MiB`,
    ok: meta.startupRss.service <= 120,
  });
  T.push({
    criterion: "Baseline answers equal the service's (every scenario it covers)",
    measured: meta.sanity.problems.length
      ? meta.sanity.problems.join("; ")
      : `${meta.sanity.checked.length} scenarios identical`,
    ok: meta.sanity.problems.length === 0,
  });
  return T;
}

function report(meta: Record<string, any>, results: ScenarioResult[], growth: GrowthRow[], profile?: string): string {
  const v = meta.versions;
  const L: string[] = [];
  L.push(`# Benchmark results — ${meta.date}${meta.label ? ` (${meta.label})` : ""}`, "");
  L.push(
    `Generated by \`npm run bench\` (bench/run.ts) in ${f0(meta.elapsedSeconds)} s. Raw numbers: \`${meta.jsonFile}\`.`,
    "",
  );
  const T = targets(meta, results, growth);
  const failed = T.filter((t) => t.ok === false).length;
  L.push(
    results.some((x) => x.name === "put-contacts" || x.items)
      ? "## Targets (issues 13 and 39)"
      : "## Targets (issue 13)",
    "",
  );
  L.push(
    `${T.length - failed} of ${T.length} criteria met. Sizes ${meta.sizeLabels.join(", ")}; the ` +
      `service/baseline matrix on the ${meta.matrixLabel} tenant.`,
    "",
  );
  L.push("| criterion | measured | result |", "|---|---|---|");
  for (const t of T) L.push(`| ${t.criterion} | ${t.measured.replace(/\|/g, "\\|")} | ${pf(t.ok)} |`);
  L.push("");
  L.push("## Machine and versions", "");
  L.push(`- ${v.cores} cores (${v.cpuModel}), ${v.memGiB} GiB, Linux ${v.kernel}`);
  L.push(
    `- Node ${v.node}; PostgreSQL ${v.postgres} (${Object.entries(v.pgSettings)
      .map(([k, x]) => `${k}=${x}`)
      .join(", ")}); Redis ${v.redis}`,
  );
  L.push(`- Prisma ${v.prisma} (@prisma/adapter-pg), Express ${v.express}, autocannon ${v.autocannon}`);
  L.push(`- load average (1 min) at start ${f2(meta.loadStart)}, at end ${f2(meta.loadEnd)}`);
  L.push("");
  L.push(
    "> **Noise.** The service, PostgreSQL, Redis and autocannon share these cores: absolute numbers are noisy. The " +
      "service/baseline ratios (measured back to back), CPU milliseconds per request and round trips per request are the comparable figures.",
    "",
  );
  L.push("## Setup", "");
  L.push(
    meta.loadSeconds > 0
      ? `- Dataset: ${f1(meta.loadSeconds)} s to create, migrate, load (triggers off), rebuild the list counters and the changes feed, and VACUUM ANALYZE (${Object.entries(
          meta.phases,
        )
          .map(([k, x]) => `${k} ${f1(x as number)} s`)
          .join(", ")}).`
      : "- Dataset: a kept database, reused (BENCH_REUSE_DB=1).",
  );
  L.push(
    `  Rows: ${Object.entries(meta.rows)
      .map(([k, n]) => `${k} ${n}`)
      .join(", ")}.`,
  );
  for (const t of meta.tenants as { label: string; size: Record<string, number> }[])
    L.push(
      `  - the ${t.label} tenant: ${t.size.leads} leads, ${t.size.contacts} contacts, ${t.size.conversations} ` +
        `conversations × ${t.size.messagesPer} messages, ${t.size.appointments} appointments, ${t.size.tickets} ` +
        `tickets (0–3 comments each), ${t.size.users} users`,
    );
  L.push(`  - the availability worst case (issue 12) and 50 small tenants.`);
  L.push(
    `- Growth table: each list scenario on each sized tenant, ${meta.sizeDuration} s at ` +
      `${meta.sizeConnections} connections after a 1 s warm-up.`,
  );
  L.push(
    `- Matrix: each (scenario, connections) run ${meta.duration} s after a ` +
      `${meta.warmup} s warm-up per scenario; autocannon over loopback, pipelining 1; latency percentiles from every 2xx response's own time at microsecond resolution (autocannon's 'response' event; its summary keeps whole milliseconds); service, baseline and baseline without count back to back.`,
  );
  L.push(
    `- Service: \`${meta.serviceLabel}\`${meta.nodeFlags.length ? ` with \`${meta.nodeFlags.join(" ")}\`` : ""}, NODE_ENV=production, LOG_LEVEL=warn, BENCH_COUNT_QUERIES=1.`,
  );
  L.push(
    `- Baseline: bench/baseline/server.ts (node:http + pg + ioredis; one statement per request; exact totals ` +
      `by a plain count(*); pool of 10).`,
  );
  L.push(
    `- Round trips: statements sent to PostgreSQL per request, from ${meta.countRequests} sequential requests. CPU ms/req: user+system CPU of the server process per request; DB ms/req: CPU of the benchmark database's backends (from /proc) per request.`,
  );
  L.push("");
  if (growth.length) {
    L.push("## Growth with the tenant's size", "");
    L.push(
      `Service, ${meta.sizeConnections} connections. DB = database backend CPU ms per request, CPU = service CPU ms per request. Two passes (sizes ascending, then descending), each size's figures over both.`,
      "",
    );
    const sizes: string[] = meta.sizeLabels;
    L.push(
      `| scenario | ${sizes.map((x) => `DB ms ${x}`).join(" | ")} | ` +
        `${sizes.map((x) => `CPU ms ${x}`).join(" | ")} | ${sizes.map((x) => `req/s ${x}`).join(" | ")} | DB ` +
        `${sizes[sizes.length - 1]} / ${sizes[0]} | flat (≤ 1.5×) |`,
    );
    L.push(
      `|---|${sizes.map(() => "---:").join("|")}|${sizes.map(() => "---:").join("|")}|${sizes.map(() => "---:").join("|")}|---:|---|`,
    );
    for (const g of growth) {
      const a = g.bySize[sizes[0]!]?.dbCpuMsPerReq ?? NaN;
      const b = g.bySize[sizes[sizes.length - 1]!]?.dbCpuMsPerReq ?? NaN;
      L.push(
        `| ${g.title} | ${sizes.map((x) => f2(g.bySize[x]?.dbCpuMsPerReq ?? NaN)).join(" | ")} | ` +
          `${sizes.map((x) => f2(g.bySize[x]?.cpuMsPerReq ?? NaN)).join(" | ")} | ` +
          `${sizes.map((x) => f0(g.bySize[x]?.rps ?? NaN)).join(" | ")} | ${f2(b / a)} | ` +
          `${pf(b <= 1.5 * a || b < 0.05)} |`,
      );
    }
    L.push("");
  }
  L.push(`## Service: all scenarios (${meta.matrixLabel} tenant)`, "");
  L.push(
    "| scenario | conns | req/s | p50 ms | p90 ms | p99 ms | non-2xx | errors | CPU ms/req | DB ms/req | round " +
      "trips/req | peak RSS MiB |",
  );
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const s of results)
    for (const r of s.runs.filter((x) => x.target === "service"))
      L.push(
        `| ${s.title} | ${r.connections} | ${f0(r.rps)} | ${f2(r.p50)} | ${f2(r.p90)} | ${f2(r.p99)} | ` +
          `${r.non2xx} | ${r.errors} | ${f2(r.cpuMsPerReq)} | ${f2(r.dbCpuMsPerReq)} | ` +
          `${f1(s.roundTrips.service)} | ${f0(r.rssMaxMiB)} |`,
      );
  L.push("");
  const batches = results.filter((x) => x.items);
  if (batches.length) {
    L.push(`## Batches: objects per second (${meta.matrixLabel} tenant)`, "");
    L.push(
      "Items/s = requests/s × items per request. The one-object scenario (the service's) and the raw baseline's batch ran at the same connection count in the same run. " +
        "Created / not created: the items' statuses in every answer of the run.",
      "",
    );
    L.push(
      "| scenario | conns | batches/s | items/s | one-object scenario req/s | **items/s ÷ its req/s** | " +
        "baseline items/s | service ÷ baseline | p50 ms service / baseline | CPU ms/item service / baseline | DB " +
        "ms/item service / baseline | round trips/item service / baseline | items created / not created |",
    );
    L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const s of batches) {
      const single = results.find((x) => x.name === s.batchOf?.single);
      const k = s.items!;
      for (const r of s.runs.filter((x) => x.target === "service")) {
        const one = single?.runs.find((x) => x.target === "service" && x.connections === r.connections);
        const b = s.runs.find((x) => x.target === "baseline" && x.connections === r.connections);
        L.push(
          `| ${s.title} | ${r.connections} | ${f1(r.rps)} | ${f0(r.rps * k)} | ${one ? f0(one.rps) : "–"} | ` +
            `**${one ? f1((r.rps * k) / one.rps) : "–"}** | ${b ? f0(b.rps * k) : "–"} | ` +
            `${b ? f2(r.rps / b.rps) : "–"} | ${f2(r.p50)} / ${b ? f2(b.p50) : "–"} | ${f2(r.cpuMsPerReq / k)} / ` +
            `${b ? f2(b.cpuMsPerReq / k) : "–"} | ${f2(r.dbCpuMsPerReq / k)} / ` +
            `${b ? f2(b.dbCpuMsPerReq / k) : "–"} | ${f2(s.roundTrips.service / k)} / ` +
            `${f2((s.roundTrips.baseline ?? NaN) / k)} | ${r.itemsCreated ?? "–"} / ${r.itemsFailed ?? "–"} |`,
        );
      }
    }
    L.push("");
  }
  L.push(`## Service / baseline (${meta.matrixLabel} tenant)`, "");
  L.push(
    "| scenario | conns | service req/s | baseline req/s | **ratio** | no-count baseline req/s | ratio to " +
      "no-count | service p99 | baseline p99 | p99 ratio | CPU ms/req service / baseline | DB ms/req service / " +
      "baseline / no-count | round trips service / baseline |",
  );
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const s of results) {
    for (const r of s.runs.filter((x) => x.target === "service")) {
      const b = s.runs.find((x) => x.target === "baseline" && x.connections === r.connections);
      if (!b) continue;
      const nc = s.runs.find((x) => x.target === "baseline-no-count" && x.connections === r.connections);
      L.push(
        `| ${s.title} | ${r.connections} | ${f0(r.rps)} | ${f0(b.rps)} | **${f2(r.rps / b.rps)}** | ` +
          `${nc ? f0(nc.rps) : "–"} | ${nc ? f2(r.rps / nc.rps) : "–"} | ${f2(r.p99)} | ${f2(b.p99)} | ` +
          `${f2(r.p99 / b.p99)} | ${f2(r.cpuMsPerReq)} / ${f2(b.cpuMsPerReq)} | ${f2(r.dbCpuMsPerReq)} / ` +
          `${f2(b.dbCpuMsPerReq)} / ${nc ? f2(nc.dbCpuMsPerReq) : "–"} | ${f1(s.roundTrips.service)} / ` +
          `${f1(s.roundTrips.baseline ?? NaN)} |`,
      );
    }
  }
  L.push("");
  L.push("## Memory", "");
  L.push(
    `- Service RSS once ready, before any load: **${f0(meta.startupRss.service)} MiB** (baseline ` +
      `${f0(meta.startupRss.baseline)} MiB).`,
  );
  L.push(
    `- Service peak RSS sampled during the ${Math.max(...(meta.connections as number[]))}-connection runs: ` +
      `**${f0(meta.servicePeak32)} MiB**; VmHWM over the whole run ${f0(meta.serviceHwm)} MiB (baseline ` +
      `${f0(meta.baselineHwm)} MiB).`,
  );
  L.push("");
  if (profile) L.push("## Flame summary (node --cpu-prof, separate phase after the measured runs)", "", profile, "");
  return L.join("\n");
}

// ---- main -----------------------------------------------------------------------------------------

function serviceEnv(url: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATABASE_URL: url,
    REDIS_URL: cfg.redisUrl,
    PORT: String(cfg.servicePort),
    HOST: "127.0.0.1",
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL || "warn",
    NODE_ENV: "production",
    NO_DEMO: "1",
    BENCH_COUNT_QUERIES: "1",
  };
}

/** The profiling phase: a fresh service under --cpu-prof, the main scenarios for a few seconds each. */
async function profilePhase(ds: Dataset, scenarios: Scenario[], svc: { args: string[] }): Promise<string | undefined> {
  const profDir = path.join(ROOT, "bench/results/profiles", runId);
  const main = [
    "me",
    "leads",
    "contacts",
    "tickets",
    "appointments",
    "conversations",
    "post-leads",
    "post-appointments",
  ];
  // A run of other scenarios only (BENCH_ONLY naming none of the main ones, e.g. the upserts) profiles those.
  const mains = scenarios.filter((x) => main.includes(x.name));
  const profiled = mains.length ? mains : scenarios;
  const spawned = Date.now();
  let readyMs = 0;
  const p = startProcess({
    name: "service (profiled)",
    cwd: ROOT,
    port: cfg.servicePort,
    args: ["--cpu-prof", `--cpu-prof-dir=${profDir}`, ...svc.args],
    env: serviceEnv(ds.url),
  });
  try {
    await waitReady(p, "/readyz");
    readyMs = Date.now() - spawned;
    for (const sc of profiled) await load(p, sc.key ?? ds.big.key, sc, 8, cfg.profileSeconds, undefined);
  } finally {
    await p.stop();
  }
  if (!existsSync(profDir)) return undefined;
  const file = readdirSync(profDir)
    .filter((f) => f.endsWith(".cpuprofile"))
    .map((f) => path.join(profDir, f))[0];
  if (!file) return undefined;
  log(`CPU profile: ${path.relative(ROOT, file)}`);
  // The start (module loading, compilation) is left out: samples from the first readyMs of the process.
  return profileMarkdown(
    file,
    `${cfg.profileSeconds} s at 8 connections of each of: ${profiled.map((x) => x.name).join(", ")} ` +
      `(${ds.big.label} tenant); the ${(readyMs / 1000).toFixed(1)} s until the service was ready are left out.`,
    readyMs,
  );
}

async function main() {
  const v = await versions();
  const loadStart = os.loadavg()[0]!;
  log(`${v.cores} cores, Node ${v.node}, PostgreSQL ${v.postgres}, Redis ${v.redis}; load ${loadStart.toFixed(2)}`);
  const svc = await serviceCommand(log, cfg.nodeFlags);
  log(`service: ${svc.label}`);
  const matrixSize = cfg.matrixSize ?? cfg.sizes[cfg.sizes.length - 1]!;
  const dsOpts = { pgBase: cfg.pgBase, dbName: cfg.dbName, sizes: cfg.sizes, matrixSize, log };
  const ds = cfg.reuseDb ? await reuseDataset(dsOpts) : await createDataset(dsOpts);
  log(`dataset ready in ${ds.loadSeconds.toFixed(1)} s: ${JSON.stringify(ds.phases)} ${JSON.stringify(ds.rows)}`);

  const service = startProcess({
    name: "service",
    cwd: ROOT,
    port: cfg.servicePort,
    args: svc.args,
    env: serviceEnv(ds.url),
  });
  const baseline = startProcess({
    name: "baseline",
    cwd: ROOT,
    port: cfg.baselinePort,
    args: ["--import", "tsx", "bench/baseline/server.ts"],
    env: {
      ...process.env,
      DATABASE_URL: ds.url,
      REDIS_URL: cfg.redisUrl,
      PORT: String(cfg.baselinePort),
      NODE_ENV: "production",
      BENCH_COUNT_QUERIES: "1",
    },
  });
  const results: ScenarioResult[] = [];
  const growth: GrowthRow[] = [];
  let sanity: { checked: string[]; problems: string[] } = { checked: [], problems: [] };
  let profile: string | undefined;
  let startupRss = { service: NaN, baseline: NaN };
  let servicePeak32 = 0;
  let serviceHwm = NaN;
  let baselineHwm = NaN;
  const maxConns = Math.max(...cfg.connections);
  const db = await dbCpuProbe(ds.url);
  try {
    await Promise.all([waitReady(service, "/readyz"), waitReady(baseline, "/healthz")]);
    await new Promise((r) => setTimeout(r, 1000));
    startupRss = { service: memory(service.pid).rss, baseline: memory(baseline.pid).rss };
    log(
      `service pid ${service.pid} and baseline pid ${baseline.pid} ready (RSS ${startupRss.service.toFixed(0)} ` +
        `/ ${startupRss.baseline.toFixed(0)} MiB)`,
    );
    const prep = await prepare(service, ds, ds.big);
    const all = buildScenarios(ds, ds.big, prep, runId);
    const chosen = all.filter((s) => !cfg.only || cfg.only.has(s.name));
    sanity = await sameAnswers(service, baseline, ds.big.key, chosen);
    log(
      sanity.problems.length
        ? `WARNING: ${sanity.problems.join("; ")}`
        : `baseline answers identical for ${sanity.checked.join(", ")}`,
    );
    // The answer check created leads and appointments in this tenant: its feed moved on.
    Object.assign(prep.changes, await changesTokens(ds, ds.big));

    // 1. Growth: the list scenarios on each sized tenant (reads only, before any write), in two
    //    passes — sizes ascending, then descending — each size's figures the two passes together:
    //    whatever drifts during the phase (the machine, the caches after the load) weighs on every
    //    size alike instead of on the sizes measured last.
    const prepared = new Map<string, Prepared>();
    for (const order of [ds.sized, [...ds.sized].reverse()]) {
      for (const t of order) {
        let tp = t === ds.big ? prep : prepared.get(t.label);
        if (!tp) {
          tp = await prepare(service, ds, t);
          prepared.set(t.label, tp);
        }
        for (const sc of buildScenarios(ds, t, tp, runId).filter(
          (x) => x.growth && (!cfg.only || cfg.only.has(x.name)),
        )) {
          let g = growth.find((x) => x.name === sc.name);
          if (!g) {
            g = {
              name: sc.name,
              title: sc.title.replace(/\(half the leads\)/, "(half)"),
              bySize: {},
              roundTrips: {},
            };
            growth.push(g);
          }
          g.roundTrips[t.label] ??= (
            await countRoundTrips(service, t.key, sc, Math.min(5, cfg.countRequests))
          ).perRequest;
          await load(service, t.key, sc, cfg.sizeConnections, 1, undefined);
          const r = await load(service, t.key, sc, cfg.sizeConnections, cfg.sizeDuration, db);
          const before = g.bySize[t.label];
          g.bySize[t.label] = before ? combineRuns(before, r) : r;
          log(
            `growth ${t.label} ${sc.name}: db ${r.dbCpuMsPerReq.toFixed(2)} cpu ${r.cpuMsPerReq.toFixed(2)} ` +
              `ms/req, ${r.rps.toFixed(0)} req/s, non-2xx ${r.non2xx}`,
          );
        }
      }
    }

    // 2. The matrix on the matrix tenant: service, baseline and (lists) baseline without count.
    const ordered = [...chosen.filter((s) => !s.write), ...chosen.filter((s) => s.write)];
    for (const sc of ordered) {
      const key = sc.key ?? ds.big.key;
      const rt = await countRoundTrips(service, key, sc, cfg.countRequests);
      const rtb = sc.baseline ? await countRoundTrips(baseline, key, sc, cfg.countRequests) : undefined;
      const res: ScenarioResult = {
        name: sc.name,
        title: sc.title,
        roundTrips: { service: rt.perRequest, baseline: rtb?.perRequest },
        countStatuses: rt.statuses,
        runs: [],
      };
      log(
        `${sc.title}: ${rt.perRequest.toFixed(1)} round ` +
          `trips/request${rtb ? ` (baseline ${rtb.perRequest.toFixed(1)})` : ""}`,
      );
      const noCount = sc.baseline && sc.growth;
      const conns = sc.connections ?? cfg.connections;
      if (cfg.warmup > 0) {
        await load(service, key, sc, Math.min(8, Math.max(...conns)), cfg.warmup, undefined);
        if (sc.baseline) await load(baseline, key, sc, 8, cfg.warmup, undefined);
      }
      // A batch against its one-object scenario at 1 connection: that scenario again just before and
      // just after the batch (the machine's speed drifts over the tens of seconds between the two
      // scenarios' own runs; the criterion takes the mean of these two).
      const pairedWith = sc.batchOf && chosen.find((x) => x.name === sc.batchOf!.single);
      for (const c of conns) {
        const paired = async () => {
          if (!pairedWith || c !== 1) return;
          const p = await load(service, pairedWith.key ?? key, pairedWith, 1, cfg.duration, db);
          res.runs.push({ target: "paired-single", ...p });
          log(`   1 conns: paired ${pairedWith.name} ${p.rps.toFixed(0)} req/s`);
        };
        await paired();
        const s = await load(service, key, sc, c, cfg.duration, db);
        res.runs.push({ target: "service", ...s });
        await paired();
        if (c === maxConns) servicePeak32 = Math.max(servicePeak32, s.rssMaxMiB);
        let line =
          `  ${String(c).padStart(2)} conns: service ${s.rps.toFixed(0)} req/s p50 ${s.p50.toFixed(2)} p99 ` +
          `${s.p99.toFixed(2)} ms non-2xx ${s.non2xx} cpu ${s.cpuMsPerReq.toFixed(2)} db ` +
          `${s.dbCpuMsPerReq.toFixed(2)} ms/req`;
        if (sc.baseline) {
          const b = await load(baseline, key, sc, c, cfg.duration, db);
          res.runs.push({ target: "baseline", ...b });
          line += ` | baseline ${b.rps.toFixed(0)} req/s p99 ${b.p99.toFixed(2)} ms → ratio ${(s.rps / b.rps).toFixed(2)}`;
          if (noCount) {
            const n = await load(baseline, key, sc, c, cfg.duration, db, { "x-bench-no-count": "1" });
            res.runs.push({ target: "baseline-no-count", ...n });
            line += ` | no count ${n.rps.toFixed(0)} req/s → ${(s.rps / n.rps).toFixed(2)}`;
          }
        }
        log(line);
        if (s.non2xx > 0) log(`  non-2xx statuses: ${JSON.stringify(s.statuses)}`);
      }
      if (sc.items) Object.assign(res, { items: sc.items, batchOf: sc.batchOf });
      if (sc.cpuOf) Object.assign(res, { cpuOf: sc.cpuOf });
      results.push(res);
    }
    serviceHwm = memory(service.pid).hwm;
    baselineHwm = memory(baseline.pid).hwm;
    await Promise.all([service.stop(), baseline.stop()]);
    // 3. Profiling: a separate, short phase (it does not skew the measured runs).
    if (cfg.profile)
      profile = await profilePhase(ds, chosen, svc).catch((e) => {
        log(`profile failed: ${(e as Error).message}`);
        return undefined;
      });
  } finally {
    await db.close().catch(() => {});
    await Promise.all([service.stop(), baseline.stop()]);
    if (!cfg.keepDb && !cfg.reuseDb)
      await dropDataset(cfg.pgBase, cfg.dbName).catch((e) => log(`drop failed: ${e.message}`));
    if (results.length || growth.length) {
      const date = new Date().toISOString().slice(0, 10);
      const out = cfg.out ?? path.join(ROOT, "bench/results", `${date}.md`);
      const jsonFile = out.replace(/\.md$/, ".json");
      mkdirSync(path.dirname(out), { recursive: true });
      const meta = {
        ...commonReportFields({ date, runId, started, versions: v, loadStart, ds, serviceLabel: svc.label }),
        serviceHwm,
        baselineHwm,
        servicePeak32,
        startupRss,
        nodeFlags: cfg.nodeFlags,
        sanity,
        jsonFile: path.relative(ROOT, jsonFile),
      };
      writeFileSync(jsonFile, `${JSON.stringify({ meta, growth, results }, null, 2)}\n`);
      writeReport(out, report(meta, results, growth, profile));
      log(`results: ${path.relative(ROOT, out)} (${((Date.now() - started) / 1000).toFixed(0)} s in all)`);
    }
  }
}

// BENCH_CITUS=1: the Citus scenario set instead (bench/citus.ts: the same scenarios on a local Citus
// cluster and on a single PostgreSQL, cluster ÷ single-node per scenario). BENCH_CHANGES=1: changes
// within a second (bench/changes.ts: long-poll and subscription latency, idle waiters).
(process.env.BENCH_CITUS === "1"
  ? import("./citus.js").then((m) => m.citusMain())
  : process.env.BENCH_CHANGES === "1"
    ? import("./changes.js").then((m) => m.changesMain())
    : main()
).then(
  () => process.stdout.write("", () => process.exit(0)),
  (e) => {
    process.stderr.write(`bench failed: ${(e as Error).stack}\n`, () => process.exit(1));
  },
);
