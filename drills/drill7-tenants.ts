// Drill 7 — cross-tenant matrix. Two tenants with one of everything. For every operation, every id
// it takes (path id, body ids, query filter ids) is filled once with the second tenant's id and once
// with a random UUID, the rest of the request being valid for the first tenant, and sent with every
// kind of key of the first tenant (full scopes, another owner's, no scopes, read-only, revoked,
// expired). Targets: the two answers are identical (status and body but the request id) — the same
// 404 as a random UUID, or the same empty list for a filter — and the whole database (both tenants)
// is byte-for-byte unchanged afterwards (creates carry an Idempotency-Key, so a claim left behind
// would show too).
// The operations of two-way sync are among them (SYNC_OPERATIONS): GET one contact, ticket and
// appointment; PUT by external id and the batch upserts, whose external id slot is filled with one
// tenant b holds (on a lead, a contact and a ticket) or a random one, under If-Match "1" (an item's
// `ifMatch: 1`): both must answer 412 with no current version, never b's object (at version 1 the
// write would apply); their body ids go to an external id no object holds (the 404 refuses the
// create); the lists' `externalId` filter. A batch answers 200 with its item failed, as the PUT would.
import { digest, diff, dump } from "./lib/dump.js";
import { richTenant, load } from "./lib/fixture.js";
import { Client, Tally, type Res } from "./lib/http.js";
import { idOf, OPERATIONS, SYNC_OPERATIONS, type IdKind, type Operation } from "./lib/operations.js";
import { startPostgres } from "./lib/postgres.js";
import { Report, type Drill } from "./lib/result.js";
import { startService } from "./lib/service.js";

/** Where an id goes: the path, the body, the query, or a batch's one item. */
type Slot = { where: "path" | "body" | "query" | "item"; name: string; kind: IdKind | "externalId" };

/** The external id tenant b holds on a lead, a contact and a ticket (at version 1). */
const HELD = "x7-held";
/** An external id no object holds: where a request's external id is not the slot, it names this one. */
const FRESH = "x7-fresh";
const PUT_OF: Record<string, Operation> = Object.fromEntries(
  SYNC_OPERATIONS.filter((o) => o.method === "PUT").map((o) => [o.name.replace(".upsert", ".batchUpsert"), o]),
);
const FILTERED_BY_EXTERNAL_ID = new Set(["leads.list", "contacts.list", "tickets.list"]);
const isBatch = (op: Operation) => op.name.endsWith(".batchUpsert");

function slotsOf(op: Operation): Slot[] {
  const out: Slot[] = [];
  if (op.pathId) out.push({ where: "path", name: "{id}", kind: op.pathId });
  if (op.path.includes("{externalId}")) out.push({ where: "path", name: "{externalId}", kind: "externalId" });
  if (isBatch(op)) {
    out.push({ where: "item", name: "externalId", kind: "externalId" });
    for (const [name, kind] of Object.entries(PUT_OF[op.name]!.bodyIds ?? {})) out.push({ where: "item", name, kind });
  } else for (const [name, kind] of Object.entries(op.bodyIds ?? {})) out.push({ where: "body", name, kind });
  for (const [name, kind] of Object.entries(op.query ?? {})) if (kind) out.push({ where: "query", name, kind });
  if (FILTERED_BY_EXTERNAL_ID.has(op.name)) out.push({ where: "query", name: "externalId", kind: "externalId" });
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
    // Tenant b's objects holding HELD, by its own PUTs.
    for (const op of SYNC_OPERATIONS.filter((o) => o.method === "PUT")) {
      const put = await client.request("PUT", op.path.replace("{externalId}", HELD), {
        key: b.apiKeys.full!.key,
        body: op.body!(b, 7_000_000),
      });
      const created = put.status === 201 && put.body?.version === 1;
      report.check(created, `tenant b's ${op.name}: ${put.status} ${put.text.slice(0, 160)}`);
    }
    const before = await dump(url);

    const today = new Date().toISOString().slice(0, 10);
    const send = (op: Operation, slot: Slot, value: string, key: string, n: number): Promise<Res> => {
      let path = op.path;
      if (op.pathId) path = path.replace("{id}", slot.where === "path" ? value : idOf(a, op.pathId));
      const external = slot.kind === "externalId" && slot.where === "path";
      path = path.replace("{externalId}", encodeURIComponent(external ? value : FRESH));
      const query: Record<string, string> = {};
      if (slot.where === "query") query[slot.name] = value;
      if (op.name === "availability.get") Object.assign(query, { from: today, to: today });
      let body: Record<string, unknown> | undefined;
      if (isBatch(op)) {
        const item: Record<string, unknown> = { externalId: FRESH, ...PUT_OF[op.name]!.body!(a, n) };
        item[slot.name] = value;
        if (slot.name === "externalId") item.ifMatch = 1;
        body = { items: [item] };
      } else if (op.method !== "GET") {
        body = op.body ? op.body(a, n) : {};
        if (slot.where === "body") body[slot.name] = value;
      }
      // A batch without an Idempotency-Key: its 200 (the item failed) would be stored with one.
      const headers: Record<string, string> = op.create && !isBatch(op) ? { "Idempotency-Key": `x7-${n}` } : {};
      if (external) headers["If-Match"] = '"1"';
      return client.request(op.method, path, { key, body, query, headers });
    };
    // A list's stableBefore is the clock's, in whole seconds: two answers a moment apart may differ in it.
    const normal = (r: Res) =>
      r.body && typeof r.body === "object"
        ? JSON.stringify({ ...r.body, request_id: undefined, stableBefore: undefined })
        : r.text;

    let n = 0;
    let compared = 0;
    const covered: string[] = [];
    const noSlot: string[] = [];
    for (const op of [...OPERATIONS, ...SYNC_OPERATIONS]) {
      const slots = slotsOf(op);
      if (!slots.length) {
        noSlot.push(op.name);
        continue;
      }
      covered.push(op.name);
      for (const slot of slots) {
        for (const k of KEYS) {
          const key = a.apiKeys[k]!.key;
          const other = slot.kind === "externalId" ? HELD : idOf(b, slot.kind);
          const foreign = await send(op, slot, other, key, n++);
          const unknown = slot.kind === "externalId" ? `x7-${crypto.randomUUID()}` : crypto.randomUUID();
          const random = await send(op, slot, unknown, key, n++);
          compared += 1;
          const what = `${op.name} ${slot.where}:${slot.name} with the ${k} key`;
          if (foreign.status !== random.status || normal(foreign) !== normal(random)) {
            report.leaks += 1;
            report.fail(
              `${what}: foreign id → ${foreign.status} ${normal(foreign).slice(0, 120)}; random → ${random.status} ${normal(random).slice(0, 120)}`,
            );
            continue;
          }
          // The baseline must be the interesting answer: 404 for ids (or the empty list for filters)
          // with a key that may call the operation; 401/403 otherwise.
          // An external id under If-Match (an item's ifMatch): 412, no current version.
          const preconditioned = slot.kind === "externalId" && slot.where !== "query";
          const want =
            k === "revoked" || k === "expired"
              ? 401
              : k === "none" && op.name !== "me"
                ? 403
                : k === "read" && op.method !== "GET"
                  ? 403
                  : slot.where === "query" && op.name !== "availability.get"
                    ? 200
                    : slot.where === "item"
                      ? 200
                      : preconditioned
                        ? 412
                        : 404;
          const answered = `${random.status} ${random.body?.error ?? ""}`;
          const kind = slot.kind === "externalId" ? "external id" : "UUID";
          report.check(random.status === want, `${what}: an unknown ${kind} answered ${answered} (want ${want})`);
          const items = random.body?.items;
          const empty = random.body?.total === 0 || (Array.isArray(items) && items.length === 0);
          if (want === 200 && slot.where === "query") report.check(empty, `${what}: an unknown id's list not empty`);
          const current = random.body?.details?.currentVersion;
          if (want === 412) report.check(current === null, `${what}: 412 with currentVersion ${current}`);
          if (want === 200 && slot.where === "item") {
            const [x] = random.body?.results ?? [];
            const error = preconditioned ? "PRECONDITION_FAILED" : "NOT_FOUND";
            const noVersion = !preconditioned || x?.error?.details?.currentVersion === null;
            const ok = x?.status === "failed" && x.error?.error === error && noVersion;
            report.check(ok, `${what}: the item answered ${JSON.stringify(x ?? null).slice(0, 200)} (want ${error})`);
          }
        }
      }
    }
    const after = await dump(url);
    const same = digest(before) === digest(after);
    if (!same) report.leaks += 1;
    report.check(same, `database changed: ${diff(before, after).join("; ")}`);
    report.figure(
      `${covered.length} ops with ids (${compared} slot×key pairs, ${n} requests), ${noSlot.length} without (${noSlot.join(", ")}); dump ${same ? "unchanged" : "CHANGED"}`,
    );
    log(`${compared} comparisons`);
    return report.result();
  },
};
