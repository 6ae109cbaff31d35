// Drill 5 — graceful shutdown under load. One instance on the drill's own PostgreSQL takes steady
// keep-alive load (reads, writes, and sends to a provider that answers after 2 s, so requests are in
// flight); mid-load it gets SIGTERM. Targets: every request the instance accepted is answered
// normally — zero connection resets, zero 5xx; requests sent after it stopped accepting get a
// refused connection (a load balancer retries those elsewhere); it exits with status 0 within 10 s.
import { richTenant, load } from "./lib/fixture.js";
import { Client, Tally, type Res } from "./lib/http.js";
import { startPostgres } from "./lib/postgres.js";
import { Report, type Drill } from "./lib/result.js";
import { sleep } from "./lib/scope.js";
import { startService } from "./lib/service.js";
import { okProvider } from "./lib/standins.js";

const EXIT_TARGET_MS = 10_000;

export const drill5: Drill = {
  id: 5,
  name: "graceful shutdown",
  async run({ scope, log, scale }) {
    const tally = new Tally();
    const report = new Report([tally]);
    const provider = await okProvider(scope, 2000);
    const pgc = await startPostgres(scope);
    const url = await pgc.createDatabase("drill5");
    const ids = await load(url, { tenants: [richTenant("s", { providerBase: provider.baseUrl })] });
    const s = ids.tenants.s!;
    const key = s.apiKeys.full!.key;
    const svc = await startService(scope, "d5-a", { DATABASE_URL: url, LOG_LEVEL: "debug" });
    const client = new Client(svc.url, tally, { maxSockets: 16 });
    scope.defer("close client", () => client.close());

    const requests: { i: number; kind: string; res: Res }[] = [];
    let n = 0;
    const next = (i: number) => {
      const k = i % 8;
      if (k === 0)
        return {
          kind: "send",
          method: "POST",
          path: `/public/v1/conversations/${s.conversations.c1}/messages`,
          opts: { key, body: { content: `bye ${i}` }, timeoutMs: 30_000 },
        };
      if (k === 1 || k === 2)
        return {
          kind: "write",
          method: "POST",
          path: "/public/v1/leads",
          opts: {
            key,
            body: { customerName: `Shutdown ${i}`, customerPhone: "+34600000077" },
            headers: { "Idempotency-Key": `sd-${i}` },
          },
        };
      return { kind: "read", method: "GET", path: "/public/v1/leads", opts: { key, query: { limit: 20 } } };
    };
    // Warm-up: one of each kind.
    for (let i = 0; i < 3; i++) {
      const st = next(i * 1 === 0 ? 0 : i);
      await client.request(st.method, st.path, st.opts);
    }
    let sigAt = 0;
    const workers = Array.from({ length: 12 }, async () => {
      for (;;) {
        const i = n++;
        if (i > 20_000) return;
        const st = next(i);
        const res = await client.request(st.method, st.path, {
          ...st.opts,
          headers: { ...(st.opts as any).headers, "X-Request-Id": `d5-${i}` },
        });
        requests.push({ i, kind: st.kind, res });
        // After the signal: a refused connection means the instance no longer accepts — go elsewhere.
        if (sigAt && (res.error === "ECONNREFUSED" || svc.child.exitCode !== null)) return;
      }
    });
    await sleep(3000 * scale);
    sigAt = Date.now();
    svc.child.kill("SIGTERM");
    log("SIGTERM sent");
    const exit = await Promise.race([svc.exited, sleep(EXIT_TARGET_MS + 5000).then(() => null)]);
    await Promise.race([Promise.all(workers), sleep(35_000)]);
    const exitMs = exit ? exit.at - sigAt : null;
    report.check(
      exit !== null && exitMs! <= EXIT_TARGET_MS,
      `exit ${exitMs ?? "none"} ms after SIGTERM (target ≤ ${EXIT_TARGET_MS} ms)`,
    );
    report.check(exit?.code === 0, `exit status ${exit?.code} signal ${exit?.signal}`);

    const after = requests.filter((r) => r.res.startedAt + r.res.ms >= sigAt);
    const inFlight = after.filter((r) => r.res.startedAt < sigAt);
    // A reset is a failure when the instance had accepted the request: its access log (debug level)
    // records every request on arrival. A reset of a request it never read (a connection closed
    // while idle, or still in the listen backlog) is a refusal: the client can retry it elsewhere.
    const received = new Set(
      svc.logs.filter((l) => l.includes("request received")).map((l) => /"reqId":"(d5-\d+)"/.exec(l)?.[1]),
    );
    const dropped = requests.filter((r) => r.res.status === 0 && r.res.error !== "ECONNREFUSED");
    const resets = dropped.filter((r) => received.has(`d5-${r.i}`));
    const notRead = dropped.length - resets.length;
    const refused = requests.filter((r) => r.res.error === "ECONNREFUSED");
    const fiveXX = requests.filter((r) => r.res.status >= 500);
    const okAfter = after.filter((r) => r.res.status >= 200 && r.res.status < 300);
    const other = requests.filter((r) => r.res.status >= 300 && r.res.status < 500);
    report.check(
      resets.length === 0,
      `${resets.length} connection resets: ${[...new Set(resets.map((r) => `${r.kind} ${r.res.error}${r.res.reusedSocket ? " (reused socket)" : ""} +${r.res.startedAt - sigAt} ms`))].slice(0, 5).join(", ")}`,
    );
    report.check(
      fiveXX.length === 0,
      `${fiveXX.length} 5xx: ${[...new Set(fiveXX.map((r) => `${r.kind} ${r.res.status} ${r.res.body?.error}`))].join(", ")}`,
    );
    report.check(
      other.length === 0,
      `${other.length} unexpected answers: ${[...new Set(other.map((r) => `${r.kind} ${r.res.status} ${r.res.body?.error}`))].join(", ")}`,
    );
    const sendsInFlight = inFlight.filter((r) => r.kind === "send");
    // The drill proves a drain only if something was draining: at least one send (its provider call
    // takes 2 s) was in progress at SIGTERM — an `every` over an empty list would pass unloaded.
    report.check(
      sendsInFlight.length > 0,
      `nothing to drain: ${inFlight.length} requests and no send in flight at SIGTERM`,
    );
    report.check(
      sendsInFlight.every((r) => r.res.status === 201),
      `a send in flight at SIGTERM was not answered 201: ${sendsInFlight
        .filter((r) => r.res.status !== 201)
        .map((r) => r.res.status || r.res.error)
        .join(", ")}`,
    );
    report.figure(
      `${requests.length} req, ${inFlight.length} in flight at SIGTERM (${sendsInFlight.length} sends) → ${inFlight.filter((r) => r.res.status >= 200 && r.res.status < 300).length} ok; ${okAfter.length} answered ok after it; ${refused.length} refused + ${notRead} unread; ${resets.length} resets of accepted; exit ${exit?.code} in ${exitMs} ms`,
    );
    return report.result();
  },
};
