// Drill 8 — secrets. An instance at LOG_LEVEL=trace runs every operation successfully (the spec's and
// those of two-way sync: GET one, PUT by external id, batch upserts with an Idempotency-Key, and a
// batch item that fails naming the holder of a phone, at trace level too), sends through
// WhatsApp, Telegram and Messenger to a provider that accepts, one that answers 401 echoing the
// request (URL, headers, body: the credentials), and one that never answers; it sees wrong, revoked,
// expired and misplaced keys and a key made with the admin CLI. Then:
//   • no raw API key, key hash or provider token appears in any log line of any service process of
//     this run (every drill's instances run at debug level or above) or in any response of any drill
//     (responses are scanned as they arrive, error responses also for stack traces);
//   • the database holds no raw key (full dump);
//   • key comparison is constant-time (the presented key's SHA-256 is compared with
//     crypto.timingSafeEqual; no string comparison of hashes or keys in server/auth).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { admin } from "./lib/admin.js";
import { dump } from "./lib/dump.js";
import { richTenant, load } from "./lib/fixture.js";
import { Client, Tally } from "./lib/http.js";
import { addApiKey, allLogs, allSecrets, secretsIn } from "./lib/observe.js";
import { OPERATIONS, SYNC_OPERATIONS, idOf, validQuery } from "./lib/operations.js";
import { startPostgres } from "./lib/postgres.js";
import { ROOT } from "./lib/proc.js";
import { Report, type Drill } from "./lib/result.js";
import { sleep } from "./lib/scope.js";
import { startService } from "./lib/service.js";
import { echoingProvider, hangingProvider, okProvider } from "./lib/standins.js";

export const drill8: Drill = {
  id: 8,
  name: "secrets",
  async run({ scope, log }) {
    const tally = new Tally();
    const report = new Report([tally]);
    const ok = await okProvider(scope);
    const echo = await echoingProvider(scope);
    const hang = await hangingProvider(scope);
    const pgc = await startPostgres(scope);
    const url = await pgc.createDatabase("drill8");
    const ids = await load(url, {
      tenants: [
        richTenant("s", { providerBase: ok.baseUrl }),
        richTenant("e", { providerBase: echo.baseUrl }),
        richTenant("h", { providerBase: hang.baseUrl }),
      ],
    });
    const s = ids.tenants.s!;
    const svc = await startService(scope, "d8-a", {
      DATABASE_URL: url,
      LOG_LEVEL: "trace",
      PROVIDER_TIMEOUT_MS: "1000",
    });
    const client = new Client(svc.url, tally);
    scope.defer("close client", () => client.close());
    const key = s.apiKeys.full!.key;

    // Every operation, successfully.
    const today = new Date().toISOString().slice(0, 10);
    let n = 0;
    for (const op of [...OPERATIONS, ...SYNC_OPERATIONS]) {
      const pathId = op.pathId ? idOf(s, op.pathId) : encodeURIComponent(`s8-${op.name}`);
      const query: Record<string, string> = {};
      for (const [q, kind] of Object.entries(op.query ?? {}))
        if (!["cursor", "offset", "since"].includes(q)) query[q] = kind ? idOf(s, kind) : validQuery(q);
      if (op.name === "availability.get") Object.assign(query, { from: today, to: today });
      if (op.name === "contacts.list") delete query.listId;
      const r = await client.request(op.method, op.path.replace(/\{id\}|\{externalId\}/, pathId), {
        key,
        query,
        body: op.body ? op.body(s, 100 + n++) : op.method === "GET" ? undefined : {},
        headers: op.create ? { "Idempotency-Key": `s8-${n}` } : {},
      });
      report.check(
        r.status >= 200 && r.status < 300,
        `${op.name} answered ${r.status} ${r.body?.error ?? ""} ${JSON.stringify(r.body?.details ?? {}).slice(0, 200)}`,
      );
    }
    // A batch item refused for a phone another contact holds: its 409 names the holder.
    const taken = await client.request("POST", "/public/v1/contacts/batch/upsert", {
      key,
      body: { items: [{ externalId: "s8-taken", fullName: "Taken", phone: "+34600000001" }] },
    });
    const [item] = taken.body?.results ?? [];
    const refused = taken.status === 200 && item?.status === "failed" && item.error?.error === "ALREADY_EXISTS";
    report.check(refused, `batch item, taken phone: ${taken.status} ${JSON.stringify(item ?? null).slice(0, 99)}`);
    // Sends through every provider kind: accepted, rejected with the credentials echoed, timed out.
    for (const t of ["s", "e", "h"] as const) {
      const tid = ids.tenants[t]!;
      for (const c of ["c1", "ct", "cf"]) {
        const r = await client.request("POST", `/public/v1/conversations/${tid.conversations[c]}/messages`, {
          key: tid.apiKeys.full!.key,
          body: { content: `secret drill ${t}${c}` },
        });
        const want = t === "s" ? "sent" : "failed";
        report.check(
          r.status === 201 && r.body?.deliveryStatus === want,
          `send ${t}.${c}: ${r.status} ${r.body?.deliveryStatus ?? r.body?.error} (want ${want})`,
        );
      }
    }
    report.check(
      ok.hits >= 3 && echo.hits >= 3 && hang.hits >= 3,
      `stand-ins saw ${ok.hits}/${echo.hits}/${hang.hits} sends`,
    );
    // Wrong, revoked, expired and misplaced keys.
    const prefix = /^(crm_[0-9A-Za-z]{12})_/.exec(key)![1]!;
    const wrongSecret = `${prefix}_${"A".repeat(40)}`;
    const tries: [string, Record<string, string>][] = [
      ["wrong secret", { "X-API-Key": wrongSecret }],
      ["revoked", { "X-API-Key": s.apiKeys.revoked!.key }],
      ["expired", { "X-API-Key": s.apiKeys.expired!.key }],
      ["bearer", { Authorization: `Bearer ${key}` }],
      ["padded", { "X-API-Key": ` ${key}x` }],
      ["truncated", { "X-API-Key": key.slice(0, -1) }],
    ];
    for (const [what, headers] of tries) {
      const r = await client.request("GET", "/public/v1/me", { headers });
      report.check(r.status === 401, `${what} key answered ${r.status}`);
    }
    // A key made with the admin CLI (its raw key is printed there once), used once.
    const made = await admin(url, "create-key", s.id, s.users.ana!, "all");
    addApiKey(made.key, "cli-created");
    const me = await client.request("GET", "/public/v1/me", { key: made.key });
    report.check(me.status === 200 && me.body?.keyPrefix === made.prefix, `CLI key: /me answered ${me.status}`);
    await sleep(500); // the last log lines arrive through a pipe

    // The detector itself: the accepting stand-in legitimately received tenant s's tokens.
    const seenByProvider = new Set(ok.received.flatMap((r) => secretsIn(r)));
    report.check(
      ["wa", "tg", "fb"].every((c) => seenByProvider.has(`provider token s.${c}`)),
      `secret detector self-check failed (${[...seenByProvider].join(", ")})`,
    );
    // Logs of every service process of this run.
    const logs = allLogs();
    const found = new Map<string, number>();
    for (const { source, line } of logs)
      for (const label of secretsIn(line)) {
        const k = `${label} in ${source}'s log`;
        found.set(k, (found.get(k) ?? 0) + 1);
      }
    for (const [k, c] of found) {
      report.leaks += c;
      report.fail(`${k} (${c} lines)`);
    }
    const sources = new Set(logs.map((l) => l.source));
    // The database: no raw key anywhere.
    const db = JSON.stringify([...(await dump(url))]);
    const rawKeys = [...allSecrets()].filter(([, label]) => label.startsWith("raw API key"));
    const inDb = rawKeys.filter(([value]) => db.includes(value));
    report.leaks += inDb.length;
    report.check(inDb.length === 0, `raw keys stored in the database: ${inDb.map(([, l]) => l).join(", ")}`);
    // Constant-time comparison.
    const auth = await readFile(path.join(ROOT, "server/auth/authenticate.ts"), "utf8");
    const keys = await readFile(path.join(ROOT, "server/auth/keys.ts"), "utf8");
    report.check(
      /hashesEqual\(row\.keyHash, hash\)/.test(auth) && /timingSafeEqual\(/.test(keys),
      "key hashes are not compared with timingSafeEqual",
    );
    report.check(
      !/keyHash\s*[!=]==|[!=]==\s*(?:row\.)?keyHash|\bkey\s*===|===\s*raw\b/.test(auth + keys),
      "a key or hash is compared with ===",
    );
    report.figure(
      `${logs.length} log lines from ${sources.size} processes, ${allSecrets().size} secrets, ${rawKeys.length} raw keys checked against the database`,
    );
    log(`scanned ${logs.length} log lines`);
    return report.result();
  },
};
