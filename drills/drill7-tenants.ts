// Drill 7 — cross-tenant matrix. Two tenants with one of everything. For every operation, every id
// it takes (path id, body ids, query filter ids) is filled once with the second tenant's id and once
// with a random UUID, the rest of the request being valid for the first tenant, and sent with every
// kind of key of the first tenant (full scopes, another owner's, no scopes, read-only, revoked,
// expired). Targets: the two answers are identical (status and body but the request id) — the same
// 404 as a random UUID, or the same empty list for a filter — and the whole database (both tenants)
// is byte-for-byte unchanged afterwards (creates carry an Idempotency-Key, so a claim left behind
// would show too).
import { digest, diff, dump } from "./lib/dump.js";
import { richTenant, load } from "./lib/fixture.js";
import { Client, Tally, type Res } from "./lib/http.js";
import { idOf, OPERATIONS, validQuery, type IdKind, type Operation } from "./lib/operations.js";
import { startPostgres } from "./lib/postgres.js";
import { Report, type Drill } from "./lib/result.js";
import { startService } from "./lib/service.js";
import type { TenantIds } from "../server/admin/fixture.js";

type Slot = { where: "path" | "body" | "query"; name: string; kind: IdKind };

function slotsOf(op: Operation): Slot[] {
  const out: Slot[] = [];
  if (op.pathId) out.push({ where: "path", name: "{id}", kind: op.pathId });
  for (const [name, kind] of Object.entries(op.bodyIds ?? {})) out.push({ where: "body", name, kind });
  for (const [name, kind] of Object.entries(op.query ?? {})) if (kind) out.push({ where: "query", name, kind });
  return out;
}

const KEYS = ["full", "bobkey", "none", "read", "revoked", "expired"] as const;

export const drill7: Drill = {
  id: 7,
  name: "cross-tenant",
  async run({ scope, log }) {
    const tally = new Tally();
    const report = new Report([tally]);
    const pgc = await startPostgres(scope);
    const url = await pgc.createDatabase("drill7");
    const ids = await load(url, { tenants: [richTenant("a"), richTenant("b")] });
    const a = ids.tenants.a!;
    const b = ids.tenants.b!;
    const svc = await startService(scope, "d7-a", { DATABASE_URL: url });
    const client = new Client(svc.url, tally);
    scope.defer("close client", () => client.close());
    const before = await dump(url);

    const today = new Date().toISOString().slice(0, 10);
    const send = (op: Operation, slot: Slot, value: string, key: string, n: number): Promise<Res> => {
      let path = op.path;
      if (op.pathId) path = path.replace("{id}", slot.where === "path" ? value : idOf(a, op.pathId));
      const query: Record<string, string> = {};
      if (slot.where === "query") query[slot.name] = value;
      if (op.name === "availability.get") Object.assign(query, { from: today, to: today });
      let body: Record<string, unknown> | undefined;
      if (op.method !== "GET") {
        body = op.body ? op.body(a, n) : {};
        if (slot.where === "body") body[slot.name] = value;
      }
      const headers: Record<string, string> = op.create ? { "Idempotency-Key": `x7-${n}` } : {};
      return client.request(op.method, path, { key, body, query, headers });
    };
    const normal = (r: Res) => (r.body && typeof r.body === "object" ? JSON.stringify({ ...r.body, request_id: undefined }) : r.text);

    let n = 0;
    let compared = 0;
    const covered: string[] = [];
    const noSlot: string[] = [];
    for (const op of OPERATIONS) {
      const slots = slotsOf(op);
      if (!slots.length) {
        noSlot.push(op.name);
        continue;
      }
      covered.push(op.name);
      for (const slot of slots) {
        for (const k of KEYS) {
          const key = a.apiKeys[k]!.key;
          const foreign = await send(op, slot, idOf(b, slot.kind), key, n++);
          const random = await send(op, slot, crypto.randomUUID(), key, n++);
          compared += 1;
          const what = `${op.name} ${slot.where}:${slot.name} with the ${k} key`;
          if (foreign.status !== random.status || normal(foreign) !== normal(random)) {
            report.leaks += 1;
            report.fail(`${what}: foreign id → ${foreign.status} ${normal(foreign).slice(0, 120)}; random → ${random.status} ${normal(random).slice(0, 120)}`);
            continue;
          }
          // The baseline must be the interesting answer: 404 for ids (or the empty list for filters)
          // with a key that may call the operation; 401/403 otherwise.
          const want =
            k === "revoked" || k === "expired" ? 401
            : k === "none" && op.name !== "me" ? 403
            : k === "read" && op.method !== "GET" ? 403
            : slot.where === "query" && op.name !== "availability.get" ? 200
            : 404;
          report.check(random.status === want, `${what}: random UUID answered ${random.status} ${random.body?.error ?? ""} (want ${want})`);
          if (want === 200) report.check(random.body?.total === 0 || (Array.isArray(random.body?.items) && random.body.items.length === 0), `${what}: filter by an unknown id is not empty`);
        }
      }
    }
    const after = await dump(url);
    const same = digest(before) === digest(after);
    if (!same) report.leaks += 1;
    report.check(same, `database changed: ${diff(before, after).join("; ")}`);
    report.figure(`${covered.length} ops with ids (${compared} slot×key pairs, ${n} requests), ${noSlot.length} without (${noSlot.join(", ")}); dump ${same ? "unchanged" : "CHANGED"}`);
    log(`${compared} comparisons`);
    return report.result();
  },
};
