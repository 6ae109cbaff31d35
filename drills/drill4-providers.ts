// Drill 4 — slow and failing providers. One instance on the drill's own PostgreSQL; WhatsApp and
// Telegram channels point at a stand-in that never answers or at one that resets connections.
// Targets: every send answers 201 with deliveryStatus "failed" within PROVIDER_TIMEOUT_MS (+ margin)
// — also several concurrent sends to one conversation; resets fail before the timeout could have
// fired; nothing is left "pending"; and no database connection or transaction is held while waiting:
// no transaction of the database sits idle for a second while 20 sends are stuck, and GET /leads keeps
// its latency meanwhile (p99 with ≤ max(3 × p99 without, p99 without + 1 s): a pool exhausted by the
// stuck sends would make it wait for their 3 s; the bounds leave room for a busy machine).
import pg from "pg";
import { richTenant, load, type TenantInput } from "./lib/fixture.js";
import { Client, percentile, pool, Tally, type Res } from "./lib/http.js";
import { startPostgres } from "./lib/postgres.js";
import { Report, type Drill } from "./lib/result.js";
import { sleep } from "./lib/scope.js";
import { startService } from "./lib/service.js";
import { hangingProvider, resettingProvider } from "./lib/standins.js";

const TIMEOUT_MS = 3000;
const MARGIN_MS = 5000;
const STUCK = 20;

export const drill4: Drill = {
  id: 4,
  name: "slow providers",
  async run({ scope, log, scale }) {
    const tally = new Tally();
    const report = new Report([tally]);
    const hang = await hangingProvider(scope);
    const reset = await resettingProvider(scope);
    const pgc = await startPostgres(scope);
    const url = await pgc.createDatabase("drill4");
    const now = Date.now();
    const slow: TenantInput = richTenant("hang", { providerBase: hang.baseUrl });
    slow.conversations = [
      ...(slow.conversations ?? []),
      ...Array.from({ length: STUCK }, (_, i) => ({
        ref: `h${i}`,
        channel: "wa",
        status: "active" as const,
        assignedTo: "ana",
        identity: { externalId: `3460010${String(i).padStart(4, "0")}`, name: `Stuck ${i}` },
        messages: [{ role: "user" as const, content: "hello?", createdAt: new Date(now - 3_600_000).toISOString() }],
      })),
    ];
    slow.leads = [
      ...(slow.leads ?? []),
      ...Array.from({ length: 100 }, (_, i) => ({
        ref: `x${i}`,
        customerName: `Lead ${i}`,
        customerPhone: "+34600000009",
        createdAt: new Date(now - i * 60_000).toISOString(),
      })),
    ];
    const ids = await load(url, { tenants: [slow, richTenant("reset", { providerBase: reset.baseUrl })] });
    const h = ids.tenants.hang!;
    const r = ids.tenants.reset!;
    const svc = await startService(scope, "d4-a", { DATABASE_URL: url, PROVIDER_TIMEOUT_MS: String(TIMEOUT_MS) });
    const client = new Client(svc.url, tally, { maxSockets: 64 });
    scope.defer("close client", () => client.close());
    const key = h.apiKeys.full!.key;
    const send = (conversationId: string, k = key) =>
      client.request("POST", `/public/v1/conversations/${conversationId}/messages`, {
        key: k,
        body: { content: "are you there?" },
        timeoutMs: 60_000,
      });

    // Warm-up (the first use of each query shape compiles it).
    await client.request("GET", "/public/v1/leads", { key, query: { limit: 50 } });
    await send(h.conversations.cw!);

    const measureLeads = async (ms: number) => {
      const lat: Res[] = [];
      const until = Date.now() + ms;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          while (Date.now() < until)
            lat.push(await client.request("GET", "/public/v1/leads", { key, query: { limit: 50 } }));
        }),
      );
      return lat;
    };
    // Without stuck sends.
    const without = await measureLeads(4000 * scale);
    // With 20 sends stuck at the provider the whole time.
    let stuckOn = true;
    const stuckResults: Res[] = [];
    const hitsBefore = hang.hits;
    const stuckLoop = Promise.all(
      Array.from({ length: STUCK }, async (_, i) => {
        while (stuckOn) stuckResults.push(await send(h.conversations[`h${i}`]!));
      }),
    );
    // Measured once all 20 wait at the provider.
    for (const until = Date.now() + 30_000; hang.hits < hitsBefore + STUCK && Date.now() < until; ) await sleep(20);
    const reached = hang.hits - hitsBefore;
    report.check(reached >= STUCK, `${reached} of ${STUCK} sends reached the silent provider`);
    // Meanwhile, the database's transactions idle for a second or more (a send holding one while it waits).
    const watch = new pg.Client({ connectionString: url });
    await watch.connect();
    scope.defer("close watch", () => watch.end());
    let idleInTransaction = 0;
    let watching = true;
    const watcher = (async () => {
      for (; watching; await sleep(100)) {
        const { rows } = await watch.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
              AND state LIKE 'idle in transaction%' AND state_change < now() - interval '1 second'`,
        );
        idleInTransaction = Math.max(idleInTransaction, rows[0]!.n);
      }
    })();
    const withStuck = await measureLeads(Math.max(4000 * scale, TIMEOUT_MS + 1000));
    watching = false;
    await watcher;
    stuckOn = false;
    await stuckLoop;
    report.check(idleInTransaction === 0, `${idleInTransaction} transactions idle 1 s or more while sends were stuck`);
    const p99w = percentile(
      without.map((x) => x.ms),
      99,
    );
    const p99s = percentile(
      withStuck.map((x) => x.ms),
      99,
    );
    report.figure(
      `GET /leads p99 ${p99w.toFixed(0)} ms without, ${p99s.toFixed(0)} ms with ${STUCK} stuck sends (n=${without.length}/${withStuck.length})`,
    );
    const p99Bound = Math.max(3 * p99w, p99w + 1000);
    const p99Says = `GET /leads p99 ${p99s.toFixed(0)} ms with ${STUCK} stuck sends vs ${p99w.toFixed(0)} ms without`;
    report.check(p99s <= p99Bound, `${p99Says} (bound ${p99Bound.toFixed(0)} ms)`);
    report.check(
      [...without, ...withStuck].every((x) => x.status === 200),
      `GET /leads answered ${[...new Set([...without, ...withStuck].map((x) => x.status))].join(",")}`,
    );
    log(`p99 without ${p99w.toFixed(0)} ms, with ${p99s.toFixed(0)} ms`);

    // Several concurrent sends to one conversation: each still within the bound.
    const same = await Promise.all(Array.from({ length: 5 }, () => send(h.conversations.c1!)));
    // Resetting provider: WhatsApp and Telegram, fast failures.
    const resets = await pool(10, 5, (i) =>
      send(i % 2 ? r.conversations.c1! : r.conversations.ct!, r.apiKeys.full!.key),
    );

    const check = (what: string, list: Res[], maxMs: number) => {
      const bad = list.filter((x) => x.status !== 201 || x.body?.deliveryStatus !== "failed");
      report.check(
        bad.length === 0,
        `${what}: ${bad.length} of ${list.length} not 201 failed (${[...new Set(bad.map((x) => `${x.status} ${x.body?.deliveryStatus ?? x.body?.error ?? x.error}`))].join(", ")})`,
      );
      const late = list.filter((x) => x.ms > maxMs);
      report.check(
        late.length === 0,
        `${what}: ${late.length} of ${list.length} answered after ${maxMs} ms (max ${Math.max(...list.map((x) => x.ms)).toFixed(0)} ms)`,
      );
      return Math.max(...list.map((x) => x.ms));
    };
    const maxStuck = check("stuck sends", stuckResults, TIMEOUT_MS + MARGIN_MS);
    const maxSame = check("concurrent sends to one conversation", same, TIMEOUT_MS + MARGIN_MS);
    const maxReset = check("reset sends", resets, TIMEOUT_MS - 100);
    report.check(
      stuckResults.every((x) => x.ms >= TIMEOUT_MS - 100),
      "a send to the silent provider gave up before the timeout",
    );
    report.figure(
      `${stuckResults.length} stuck sends ≤ ${maxStuck.toFixed(0)} ms, 5 same-conversation ≤ ${maxSame.toFixed(0)} ms, ${resets.length} resets ≤ ${maxReset.toFixed(0)} ms (timeout ${TIMEOUT_MS})`,
    );
    report.check(
      hang.hits >= stuckResults.length && reset.hits >= resets.length,
      `provider stand-ins saw ${hang.hits}/${reset.hits} requests`,
    );

    const db = new pg.Client({ connectionString: url });
    await db.connect();
    scope.defer("close db", () => db.end());

    // An instance killed (SIGKILL) while its sends wait for the provider: the message was stored and
    // committed before the call. A retry with the same Idempotency-Key at another instance waits until
    // the claim is abandoned (PROVIDER_TIMEOUT_MS + 10 s), then finishes it: 201, deliveryStatus
    // failed, one message. A send without a key is settled by the survivor's sweep.
    const [victim, survivor] = await Promise.all([
      startService(scope, "d4-victim", { DATABASE_URL: url, PROVIDER_TIMEOUT_MS: String(TIMEOUT_MS) }),
      startService(scope, "d4-survivor", { DATABASE_URL: url, PROVIDER_TIMEOUT_MS: String(TIMEOUT_MS) }),
    ]);
    const vc = new Client(victim.url, tally);
    const sc = new Client(survivor.url, tally);
    scope.defer("close crash clients", () => {
      for (const c of [vc, sc]) c.close();
    });
    await vc.request("POST", `/public/v1/conversations/${h.conversations.cw}/messages`, {
      key,
      body: { content: "warm-up" },
    });
    const crashBody = { content: "cut by a crash" };
    const crashPath = `/public/v1/conversations/${h.conversations.h0}/messages`;
    const keyed = vc.request("POST", crashPath, { key, body: crashBody, headers: { "Idempotency-Key": "crash-1" } });
    const unkeyed = vc.request("POST", crashPath, { key, body: { content: "cut by a crash, no key" } });
    // Kill once both messages are committed (pending) and their sends are waiting for the provider.
    let caught = 0;
    for (const until = Date.now() + 15_000; Date.now() < until && caught < 2; await sleep(50))
      caught = (
        await db.query(
          `SELECT count(*)::int AS n FROM "Message" WHERE "content" LIKE 'cut by a crash%' AND "deliveryStatus" = 'pending'`,
        )
      ).rows[0].n;
    await victim.stop("SIGKILL");
    report.check(caught === 2, `only ${caught} of 2 sends were caught mid-flight by the kill`);
    await Promise.all([keyed, unkeyed]);
    const t0 = Date.now();
    const retry = await sc.request("POST", crashPath, {
      key,
      body: crashBody,
      headers: { "Idempotency-Key": "crash-1" },
      timeoutMs: 60_000,
    });
    const waited = Date.now() - t0;
    report.check(
      retry.status === 201 && retry.body?.deliveryStatus === "failed",
      `retry after the crash: ${retry.status} ${retry.body?.deliveryStatus ?? retry.body?.error ?? retry.error}`,
    );
    report.check(retry.headers["idempotent-replayed"] === "true", "retry after the crash was not a replay");
    const crashRows = (await db.query(`SELECT "deliveryStatus" AS s FROM "Message" WHERE "content" = 'cut by a crash'`))
      .rows;
    report.check(
      crashRows.length === 1 && crashRows[0].s === "failed",
      `after the crash and retry: ${JSON.stringify(crashRows)}`,
    );
    let swept = "";
    for (const until = Date.now() + 35_000; Date.now() < until; await sleep(500)) {
      swept = (
        await db.query(`SELECT "deliveryStatus" AS s FROM "Message" WHERE "content" = 'cut by a crash, no key'`)
      ).rows
        .map((r) => r.s)
        .join(",");
      if (swept === "failed") break;
    }
    report.check(swept === "failed", `unkeyed send cut by the crash: ${swept} (want failed after the sweep)`);
    report.figure(`crash mid-send: keyed retry settled in ${(waited / 1000).toFixed(1)} s, unkeyed swept`);
    const pending = (await db.query(`SELECT count(*)::int AS n FROM "Message" WHERE "deliveryStatus" = 'pending'`))
      .rows[0].n;
    report.check(pending === 0, `${pending} messages left pending`);
    const failed = (
      await db.query(
        `SELECT count(*)::int AS n FROM "Message" WHERE "deliveryStatus" = 'failed' AND "content" = 'are you there?'`,
      )
    ).rows[0].n;
    report.check(
      failed === stuckResults.length + same.length + resets.length,
      `${failed} failed messages stored for ${stuckResults.length + same.length + resets.length} sends`,
    );
    return report.result();
  },
};
