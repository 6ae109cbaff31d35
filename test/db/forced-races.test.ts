// Races of the two-way sync forced, not hoped for (docs/decisions/api.md, "Two-way sync": "Atomic").
// The test holds the object's row lock in a transaction of its own, starts the requests one at a
// time, sees each one wait on that lock (waitForLockWaiters, test/helpers/locks.ts: every node of a
// Citus cluster), and only then releases it. A row's waiters get it in the order they queued, so the
// request started first writes first on every run. A request seen waiting for the row has done its
// reads and its checks (they lock nothing): a write with If-Match has passed checkVersion() at the
// version both read, so the 412 the later one answers comes from its guarded write (versionGuard(),
// then missedWrite()).
// @topology citus
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { startApp, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { waitForLockWaiters } from "../helpers/locks.js";

const onPostgres = Boolean(process.env.DATABASE_URL);

type Resource = "leads" | "contacts" | "tickets";
const RESOURCES: Resource[] = ["leads", "contacts", "tickets"];
const TABLE = { leads: "Lead", contacts: "Contact", tickets: "Ticket" } as const;
type Fields = Record<string, unknown>;

let app: TestApp & { testDb: { url?: string; directUrl?: string } };
let ids: LoadResult;
const acme = () => ids.tenants.acme!;
const req = (method: string, path: string, opts: { body?: unknown; headers?: Record<string, string> } = {}) =>
  app.request(method, `/public/v1${path}`, { key: acme().apiKeys.full!.key, ...opts });
let n = 0;
const uniq = (p: string) => `${p}-${Date.now().toString(36)}-${++n}`;
const phone = () => `+3462${String(1_000_000 + ++n).slice(-7)}`;
const ifMatch = (version: number) => ({ "If-Match": `"${version}"` });
const key = () => ({ "Idempotency-Key": uniq("key") });
const current = async (r: Resource, id: string) => (await req("GET", `/${r}/${id}`)).body;

/** Two PATCH bodies that change the same field differently. */
const patches = (r: Resource): [Fields, Fields] =>
  ({
    leads: [{ notes: "first" }, { notes: "second" }] as [Fields, Fields],
    contacts: [{ fullName: "First" }, { fullName: "Second" }] as [Fields, Fields],
    tickets: [{ subject: "First" }, { subject: "Second" }] as [Fields, Fields],
  })[r];

/**
 * Two changes of different fields, for PUT bodies over the one the object was created with. A
 * ticket's PUT must name its subject: the second names the first's, so neither contradicts the other.
 */
const changes = (r: Resource): [Fields, Fields] =>
  ({
    leads: [{ notes: "first" }, { quality: "second" }] as [Fields, Fields],
    contacts: [{ fullName: "First" }, { email: `${uniq("second")}@acme.test` }] as [Fields, Fields],
    tickets: [{ subject: "First" }, { subject: "First", assignedTo: acme().users.ana }] as [Fields, Fields],
  })[r];

type Made = { id: string; externalId: string; version: number; put: Fields };

/** A new object with an external id, created by PUT: its id, external id, version and PUT body. */
async function newObject(r: Resource): Promise<Made> {
  const externalId = uniq(r);
  const put = {
    leads: { customerName: "Race" },
    contacts: { phone: phone() },
    tickets: { subject: "Race", customerId: acme().contacts.bea },
  }[r];
  const created = await req("PUT", `/${r}/by-external-id/${externalId}`, { body: put });
  expect(created.status, created.text).toBe(201);
  return { id: created.body.id, externalId, version: created.body.version, put };
}

/**
 * Locks the row `id` of `table` FOR UPDATE in a transaction of a session of the test's own (on Citus
 * through the coordinator: the lock is taken on the tenant's shard, wherever it lives); the returned
 * function commits it.
 */
async function holdRow(table: string, id: string): Promise<() => Promise<void>> {
  const c = new pg.Client({ connectionString: app.testDb.url });
  await c.connect();
  try {
    await c.query("BEGIN");
    const sql = `SELECT 1 FROM "${table}" WHERE "tenantId" = $1 AND "id" = $2 FOR UPDATE`;
    expect((await c.query(sql, [acme().id, id])).rowCount).toBe(1);
  } catch (err) {
    await c.end();
    throw err;
  }
  return () => c.query("COMMIT").then(() => c.end());
}

/**
 * The lock waits once `n` backends wait on a lock; fails as soon as one of `started` answers first
 * (it never waited: the race did not happen as forced).
 */
async function queued(n: number, started: Promise<Response>[]) {
  let waited = false;
  const early = new Promise<never>((_, reject) => {
    for (const [i, p] of started.entries())
      p.then(
        (r) => waited || reject(new Error(`request ${i} answered before ${n} waited: ${r.status} ${r.text}`)),
        (err) => waited || reject(err),
      );
  });
  try {
    return await Promise.race([waitForLockWaiters(app.testDb, n), early]);
  } finally {
    waited = true;
  }
}

/**
 * `first` and `second` in a forced order on the row `id` of `table`: the test holds the row, `first`
 * is seen waiting for the test's transaction, then `second` is seen queued behind `first`, then the
 * lock is released. Their answers, in that order.
 */
async function forced(table: string, id: string, first: () => Promise<Response>, second: () => Promise<Response>) {
  const release = await holdRow(table, id);
  const started: Promise<Response>[] = [];
  try {
    // Nothing else waits in this database meanwhile: the first waiter is `first`, the other `second`.
    started.push(first());
    await queued(1, started);
    started.push(second());
    // `first` holds the row's tuple lock while it waits for the test's transaction; `second` waits for
    // that tuple lock: it is queued behind `first` and gets the row once `first` has written.
    const both = await queued(2, started);
    const locks = both.map((w) => w.locktype).sort();
    expect(locks, "the second request queued behind the first").toEqual(["transactionid", "tuple"]);
  } catch (err) {
    await release();
    await Promise.allSettled(started); // nothing of this race runs on into the next one
    throw err;
  }
  await release();
  return (await Promise.all(started)) as [Response, Response];
}

/** The 412 of a write that lost to the one that made `version`. */
function lost(r: Response, version: number, what: string) {
  const seen = { status: r.status, error: r.body?.error, details: r.body?.details, etag: r.headers.get("etag") };
  const want = { status: 412, error: "PRECONDITION_FAILED", details: { currentVersion: version } };
  expect.soft(seen, what).toEqual({ ...want, etag: `"${version}"` });
}

// Soft assertions: each resource's race runs and is reported even when another's fails.
describe.skipIf(!onPostgres)("races forced by a held row lock (not on PGlite: one connection, no interleaving)", () => {
  beforeAll(async () => {
    app = await startApp();
    const bea = { ref: "bea", fullName: "Bea Soto", phone: "+34600000001" };
    ids = await app.load(fixture(tenant("acme", { contacts: [bea] })));
  }, 120_000);
  afterAll(() => app?.close());

  it("the lost update: two PATCHes with one If-Match wait at their guarded writes; first 200, other 412", async () => {
    for (const r of RESOURCES) {
      const o = await newObject(r);
      const [x, y] = patches(r);
      const [a, b] = await forced(
        TABLE[r],
        o.id,
        () => req("PATCH", `/${r}/${o.id}`, { body: x, headers: ifMatch(o.version) }),
        () => req("PATCH", `/${r}/${o.id}`, { body: y, headers: ifMatch(o.version) }),
      );
      expect.soft(a.status, `${r}: ${a.text}`).toBe(200);
      expect.soft(a.body, r).toMatchObject({ ...x, version: o.version + 1 });
      lost(b, o.version + 1, r);
      expect.soft(await current(r, o.id), r).toEqual(a.body);
    }
  });

  it("concurrent PUT updates of one external id: both update, in turn, each answering what it stored", async () => {
    for (const r of RESOURCES) {
      const o = await newObject(r);
      const [x, y] = changes(r);
      const path = `/${r}/by-external-id/${o.externalId}`;
      // The first runs as PATCH runs (its one statement), the second in its Idempotency-Key's transaction.
      const [a, b] = await forced(
        TABLE[r],
        o.id,
        () => req("PUT", path, { body: { ...o.put, ...x } }),
        () => req("PUT", path, { body: { ...o.put, ...y }, headers: key() }),
      );
      expect.soft([a.status, b.status], `${r}: ${a.text} ${b.text}`).toEqual([200, 200]);
      expect.soft(a.body, r).toMatchObject({ id: o.id, ...x, version: o.version + 1 });
      // The second wrote its own field after the first's write, which it kept.
      expect.soft(b.body, r).toMatchObject({ id: o.id, ...x, ...y, version: o.version + 2 });
      expect.soft(await current(r, o.id), r).toEqual(b.body);
    }
  });

  it("PUT with If-Match after a PATCH that writes first: its guarded write misses, 412, nothing written", async () => {
    for (const r of RESOURCES)
      for (const withKey of [false, true]) {
        const what = `${r}${withKey ? " with an Idempotency-Key" : ""}`;
        const o = await newObject(r);
        const [x, y] = changes(r);
        const headers = { ...(withKey ? key() : {}), ...ifMatch(o.version) };
        const [a, b] = await forced(
          TABLE[r],
          o.id,
          () => req("PATCH", `/${r}/${o.id}`, { body: x }),
          () => req("PUT", `/${r}/by-external-id/${o.externalId}`, { body: { ...o.put, ...y }, headers }),
        );
        expect.soft(a.status, `${what}: ${a.text}`).toBe(200);
        expect.soft(a.body.version, what).toBe(o.version + 1);
        lost(b, o.version + 1, what);
        expect.soft(await current(r, o.id), what).toEqual(a.body);
      }
  });

  it("a comment and a PATCH with one If-Match: whichever has the ticket's row first wins, the other 412", async () => {
    const thread = async (id: string) => (await current("tickets", id)).comments.map((c: { body: string }) => c.body);
    const comment = (t: Made) =>
      req("POST", `/tickets/${t.id}/comments`, { body: { body: "raced" }, headers: ifMatch(t.version) });
    const patch = (t: Made) =>
      req("PATCH", `/tickets/${t.id}`, { body: { subject: "Patched" }, headers: ifMatch(t.version) });

    // The PATCH first: the comment checks the version on the ticket's row once it has locked it.
    const t1 = await newObject("tickets");
    const [p1, c1] = await forced(
      "Ticket",
      t1.id,
      () => patch(t1),
      () => comment(t1),
    );
    expect.soft(p1.status, p1.text).toBe(200);
    expect.soft(p1.body.version).toBe(t1.version + 1);
    lost(c1, t1.version + 1, "the comment after the PATCH");
    expect.soft(await thread(t1.id)).toEqual([]);

    // The comment first: the PATCH has passed its check and waits at its guarded write.
    const t2 = await newObject("tickets");
    const [c2, p2] = await forced(
      "Ticket",
      t2.id,
      () => comment(t2),
      () => patch(t2),
    );
    expect.soft(c2.status, c2.text).toBe(201);
    expect.soft(c2.body.version).toBe(t2.version + 1);
    lost(p2, t2.version + 1, "the PATCH after the comment");
    expect.soft(await current("tickets", t2.id)).toMatchObject({ subject: "Race", version: t2.version + 1 });
    expect.soft(await thread(t2.id)).toEqual(["raced"]);
  });

  it("a batch item with ifMatch and a PATCH with the same If-Match: the one that writes second 412", async () => {
    for (const r of RESOURCES) {
      const [x, y] = changes(r);
      const batch = (o: Made, headers: Record<string, string> = {}) => {
        const items = [{ externalId: o.externalId, ...o.put, ...y, ifMatch: o.version }];
        return req("POST", `/${r}/batch/upsert`, { body: { items }, headers });
      };
      const patch = (o: Made) => req("PATCH", `/${r}/${o.id}`, { body: x, headers: ifMatch(o.version) });

      // The batch first: its item updates; the PATCH's guarded write misses.
      const o1 = await newObject(r);
      const [b1, p1] = await forced(
        TABLE[r],
        o1.id,
        () => batch(o1),
        () => patch(o1),
      );
      expect.soft(b1.status, `${r}: ${b1.text}`).toBe(200);
      const updated = { status: "updated", id: o1.id, item: { ...y, version: o1.version + 1 }, error: null };
      expect.soft(b1.body.results?.[0], r).toMatchObject(updated);
      lost(p1, o1.version + 1, `${r}: the PATCH after the batch`);
      expect.soft(await current(r, o1.id), r).toEqual(b1.body.results?.[0]?.item);

      // The PATCH first: the batch's item (in the key's transaction) misses and fails alone, with its 412.
      const o2 = await newObject(r);
      const [p2, b2] = await forced(
        TABLE[r],
        o2.id,
        () => patch(o2),
        () => batch(o2, key()),
      );
      expect.soft(p2.status, `${r}: ${p2.text}`).toBe(200);
      expect.soft(p2.body.version, r).toBe(o2.version + 1);
      expect.soft(b2.status, `${r}: ${b2.text}`).toBe(200);
      const error = { error: "PRECONDITION_FAILED", details: { currentVersion: o2.version + 1 } };
      expect.soft(b2.body.results?.[0], r).toMatchObject({ status: "failed", id: null, item: null, error });
      expect.soft(await current(r, o2.id), r).toEqual(p2.body);
    }
  });
});
