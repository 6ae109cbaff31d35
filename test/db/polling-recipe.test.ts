// The polling recipe of the lists (README "Polling for changes"): read `sort=-updatedAt` from a resume
// point with `updatedFrom`, page by `nextCursor`, then resume from the earlier of the newest updatedAt
// seen and the answer's `stableBefore`, deduplicating by id + version. A write whose updatedAt is
// stamped before it commits is the danger: a later write commits first, a poll sees only that one, and
// resuming from the newest updatedAt seen would pass the late one for good. Here the late commit is
// forced, not hoped for: the test holds a row lock (or its own transaction open) while the service's
// write waits behind it, makes another write commit meanwhile, polls, then lets the first commit.
// PostgreSQL and Citus only: PGlite has one connection, so no transaction can be held open across a
// poll (its writes are serialised; the recipe holds there trivially).
// @topology citus
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { STABLE_LAG_MS } from "../../routers/_lib/list.js";
import { startApp, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { waitForLockWaiters } from "../helpers/locks.js";

const onPostgres = Boolean(process.env.DATABASE_URL);

let app: TestApp & { testDb: { url?: string; directUrl?: string } };
let ids: LoadResult;
const acme = () => ids.tenants.acme!;
const req = (method: string, path: string, body?: unknown) =>
  app.request(method, `/public/v1${path}`, { key: acme().apiKeys.full!.key, body });

interface Seen {
  id: string;
  version: number;
  updatedAt: string;
}

/**
 * One poll of the recipe over `list` from `resume`: every page of `sort=-updatedAt&updatedFrom=resume`
 * (2 a page, so that the cursor is walked), the objects seen, and the next resume point: the earlier
 * of the newest updatedAt seen and stableBefore (`naive`: the newest seen alone, the mistake).
 */
async function poll(list: string, resume: string) {
  const seen: Seen[] = [];
  let cursor: string | undefined;
  let stableBefore = "";
  for (let page = 0; page < 100; page++) {
    const q = new URLSearchParams({ sort: "-updatedAt", updatedFrom: resume, limit: "2" });
    if (cursor) q.set("cursor", cursor);
    const res = await req("GET", `/${list}?${q}`);
    expect(res.status, res.text).toBe(200);
    seen.push(...(res.body.items as Seen[]));
    stableBefore ||= res.body.stableBefore;
    cursor = res.body.nextCursor ?? undefined;
    if (!cursor) break;
  }
  const newest =
    seen
      .map((s) => s.updatedAt)
      .sort()
      .at(-1) ?? resume;
  return { seen, naive: newest, next: newest < stableBefore ? newest : stableBefore, stableBefore };
}

/** Locks a row FOR UPDATE in a session of the test's own; the returned function commits. */
async function holdRow(table: string, id: string): Promise<() => Promise<void>> {
  const c = new pg.Client({ connectionString: app.testDb.url });
  await c.connect();
  await c.query("BEGIN");
  const locked = await c.query(`SELECT 1 FROM "${table}" WHERE "tenantId" = $1 AND "id" = $2 FOR UPDATE`, [
    acme().id,
    id,
  ]);
  expect(locked.rowCount).toBe(1);
  return () => c.query("COMMIT").then(() => c.end());
}

const has = (seen: Seen[], o: { id: string; version: number }) =>
  seen.some((s) => s.id === o.id && s.version === o.version);

describe.skipIf(!onPostgres)("the polling recipe misses no late commit (not on PGlite: one connection)", () => {
  beforeAll(async () => {
    app = await startApp();
    ids = await app.load(
      fixture(
        tenant("acme", {
          contacts: [
            { ref: "bea", fullName: "Bea Soto", phone: "+34600000001" },
            { ref: "carl", fullName: "Carl Ruiz", phone: "+34600000002" },
          ],
          leads: [
            { ref: "l1", customerName: "Late" },
            { ref: "l2", customerName: "Early" },
            { ref: "l3", customerName: "Other" },
          ],
        }),
      ),
    );
  }, 120_000);
  afterAll(() => app?.close());

  it("stableBefore is the database's clock less the bound on a writing transaction, in whole seconds", async () => {
    const c = new pg.Client({ connectionString: app.testDb.url });
    await c.connect();
    const clock = async () =>
      Number((await c.query("SELECT extract(epoch FROM clock_timestamp()) * 1000 AS t")).rows[0].t);
    try {
      const before = await clock();
      const res = await req("GET", "/leads?limit=1");
      const after = await clock();
      const stable = new Date(res.body.stableBefore).getTime();
      expect(stable % 1000).toBe(0);
      expect(stable).toBeGreaterThan(before - STABLE_LAG_MS - 1_000);
      expect(stable).toBeLessThanOrEqual(after - STABLE_LAG_MS);
    } finally {
      await c.end();
    }
  });

  it("leads: a PATCH that waits behind a lock commits after a later PATCH and a poll; the recipe still sees it", async () => {
    const start = await poll("leads", "2000-01-01T00:00:00.000Z");
    const late = acme().leads.l1!;
    const other = acme().leads.l3!;
    const release = await holdRow("Lead", late);
    let answered = false;
    let patched: Promise<Response> | undefined;
    try {
      // The service stamps the lead's updatedAt, then its UPDATE waits for the test's lock.
      patched = req("PATCH", `/leads/${late}`, { notes: "late" }).finally(() => {
        answered = true;
      });
      await waitForLockWaiters(app.testDb, 1);
      expect(answered).toBe(false);
      // Another lead changes and commits meanwhile: its updatedAt is later than the waiting one's.
      const early = await req("PATCH", `/leads/${other}`, { notes: "early" });
      expect(early.status, early.text).toBe(200);
      const during = await poll("leads", start.next);
      expect(has(during.seen, early.body)).toBe(true);
      expect(during.seen.some((s) => s.id === late && s.updatedAt > start.naive && s.version > 1)).toBe(false);
      await release();
      const done = await patched;
      expect(done.status, done.text).toBe(200);
      // The forced order happened: the late write's updatedAt is before what the poll saw last.
      expect(done.body.updatedAt < during.naive).toBe(true);
      // From the newest seen alone, the late write is lost; from the recipe's point, it comes.
      expect(has((await poll("leads", during.naive)).seen, done.body)).toBe(false);
      expect(has((await poll("leads", during.next)).seen, done.body)).toBe(true);
    } finally {
      if (!answered) await release().catch(() => {});
      await patched;
    }
  });

  it("contacts (updatedAt from the database's clock): a transaction held open across a poll is not missed", async () => {
    const start = await poll("contacts", "2000-01-01T00:00:00.000Z");
    // The test's own transaction writes a contact (the trigger stamps its start time) and stays open.
    const held = new pg.Client({ connectionString: app.testDb.url });
    await held.connect();
    try {
      await held.query("BEGIN");
      await held.query(`UPDATE "Contact" SET "fullName" = 'Held open' WHERE "tenantId" = $1 AND "id" = $2`, [
        acme().id,
        acme().contacts.bea,
      ]);
      // A later transaction of the service commits first.
      const later = await req("PATCH", `/contacts/${acme().contacts.carl}`, { fullName: "Carl Committed" });
      expect(later.status, later.text).toBe(200);
      const during = await poll("contacts", start.next);
      expect(has(during.seen, later.body)).toBe(true);
      expect(during.seen.some((s) => s.id === acme().contacts.bea && s.updatedAt > start.naive)).toBe(false);
      await held.query("COMMIT");
      const bea = (await req("GET", `/contacts/${acme().contacts.bea}`)).body;
      expect(bea.fullName).toBe("Held open");
      expect(bea.updatedAt < during.naive).toBe(true);
      expect(has((await poll("contacts", during.naive)).seen, bea)).toBe(false);
      expect(has((await poll("contacts", during.next)).seen, bea)).toBe(true);
    } finally {
      await held.end();
    }
  });
});
