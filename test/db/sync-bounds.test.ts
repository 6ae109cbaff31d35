// Upserts whose work is bounded by what they answer: a ticket batch or PUT decides on the tickets'
// own columns and reads threads once, for the results it sends (within the page byte budget);
// Idempotency-Key records stay compact (a ticket as its columns and thread length, deflated, within
// RECORD_MAX_BYTES) and replay byte-for-byte after later writes; batch items carry their own
// preconditions (`ifMatch`), and an If-Match / If-None-Match header on a batch is a 422.
// @topology citus
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { RECORD_MAX_BYTES } from "../../server/idempotency.js";
import { expectEnvelope, freshDatabase, startApp, untimed, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;
const statements: string[] = [];
const BIG = { perMinute: 100_000, perDay: 1_000_000 };
const TICKETS = 100;
const COMMENTS = 15;
/** ~45 KB of JSON a ticket: 100 of them pass the 4 MiB page budget, so a batch's answer is cut. */
const COMMENT_CHARS = 3_000;
const key = () => ids.tenants.acme!.apiKeys.full!.key;
const sql = <R = Record<string, unknown>>(text: string, params: unknown[] = []) => untimed(app.db)<R>(text, params);
const req = (method: string, path: string, opts: { body?: unknown; headers?: Record<string, string> } = {}) =>
  app.request(method, `/public/v1${path}`, { key: key(), ...opts });
const threadReads = () => statements.filter((s) => s.includes('"TicketComment"')).length;
const hd = (i: number) => `hd-${String(i).padStart(3, "0")}`;

/** A comment of `n` characters that no two comments share (so nothing compresses them away). */
const text = (n: number) => randomBytes(n).toString("base64").slice(0, n);

beforeAll(async () => {
  app = await startApp({ db: await freshDatabase({ observe: (s) => statements.push(s) }) });
  ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: BIG,
        contacts: [{ ref: "bea", fullName: "Bea", phone: "+34600000001" }],
        tickets: Array.from({ length: TICKETS }, (_, i) => ({
          ref: `t${i}`,
          subject: `Ticket ${i}`,
          createdBy: "ana",
          contact: "bea",
          externalId: hd(i),
          comments: Array.from({ length: COMMENTS }, () => ({ author: "ana", body: text(COMMENT_CHARS) })),
        })),
      }),
    ),
  );
}, 180_000);
afterAll(() => app?.close());

const bea = () => ids.tenants.acme!.contacts.bea!;
const batchItems = (count = TICKETS) =>
  Array.from({ length: count }, (_, i) => ({ externalId: hd(i), subject: `Ticket ${i}`, customerId: bea() }));

/**
 * Runs `fn` and returns what it returned and the bytes JSON.stringify
 * produced meanwhile (the whole process: the service's serialization).
 */
async function serialized<T>(fn: () => Promise<T>): Promise<{ result: T; bytes: number }> {
  const spy = vi.spyOn(JSON, "stringify");
  try {
    const result = await fn();
    const bytes = spy.mock.results.reduce(
      (n, r) => n + (r.type === "return" && typeof r.value === "string" ? r.value.length : 0),
      0,
    );
    return { result, bytes };
  } finally {
    spy.mockRestore();
  }
}

describe("a ticket batch over long threads", () => {
  it("decides on the tickets' columns, reads the threads of the results it sends in one statement, and serializes about what it sends", async () => {
    statements.length = 0;
    const { result: r, bytes } = await serialized(() =>
      req("POST", "/tickets/batch/upsert", { body: { items: batchItems() } }),
    );
    expect(r.status).toBe(200);
    const results = r.body.results as { status: string; id: string; item: { comments: unknown[] } | null }[];
    expect(results.map((x) => x.status)).toEqual(Array(TICKETS).fill("unchanged"));
    expect(results.every((x) => typeof x.id === "string")).toBe(true);
    // Cut to the byte budget in the items' order: a prefix has its tickets, with whole threads.
    const sent = results.findIndex((x) => x.item === null);
    expect(sent).toBeGreaterThan(0);
    expect(results.slice(sent).every((x) => x.item === null)).toBe(true);
    expect(results.slice(0, sent).every((x) => x.item!.comments.length === COMMENTS)).toBe(true);
    expect(Buffer.byteLength(r.text)).toBeLessThanOrEqual(4 * 1024 * 1024);
    // One statement read threads (the answer's, within the budget); none per ticket.
    expect(threadReads()).toBe(1);
    // One statement read the items' tickets; an unchanged item writes nothing, so it takes no
    // savepoint: a handful of statements for the batch, none per item.
    expect(statements.filter((q) => /SAVEPOINT/i.test(q))).toEqual([]);
    expect(statements.length, statements.join("\n")).toBeLessThanOrEqual(10);
    // What was serialized is the answer (once by the adapter) and little else: not every ticket.
    expect(bytes).toBeLessThan(r.text.length * 1.5);
  });

  it("a PUT reads the ticket's thread once, for its answer", async () => {
    statements.length = 0;
    const r = await req("PUT", `/tickets/by-external-id/${hd(5)}`, {
      body: { subject: "Ticket 5", customerId: bea() },
    });
    expect(r.status).toBe(200);
    expect(r.body.comments).toHaveLength(COMMENTS);
    expect(threadReads()).toBe(1);
    statements.length = 0;
    const p = await req("PATCH", `/tickets/${r.body.id}`, { body: { status: "pending" } });
    expect(p.status).toBe(200);
    expect(p.body.comments).toHaveLength(COMMENTS);
    expect(threadReads()).toBe(1);
  });
});

describe("stored replays are small and replay the first answer", () => {
  const recordBytes = async (k: string) =>
    (
      await sql<{ n: number }>(
        `SELECT octet_length("responseBody"::text)::int AS n FROM "IdempotencyRecord" WHERE "key" = $1`,
        [k],
      )
    )[0]!.n;

  it("a ticket PUT: its record keeps the ticket's columns and thread length; the replay after later writes is identical", async () => {
    const k = `put-${randomBytes(4).toString("hex")}`;
    const first = await req("PUT", `/tickets/by-external-id/${hd(7)}`, {
      body: { subject: "Ticket 7 renamed", customerId: bea() },
      headers: { "Idempotency-Key": k },
    });
    expect(first.status).toBe(200);
    expect(Buffer.byteLength(first.text)).toBeGreaterThan(40_000);
    expect(await recordBytes(k)).toBeLessThan(4_096);
    // Later writes: the ticket renamed again and commented on.
    expect((await req("PATCH", `/tickets/${first.body.id}`, { body: { subject: "Later" } })).status).toBe(200);
    expect((await req("POST", `/tickets/${first.body.id}/comments`, { body: { body: "after" } })).status).toBe(201);
    const again = await req("PUT", `/tickets/by-external-id/${hd(7)}`, {
      body: { subject: "Ticket 7 renamed", customerId: bea() },
      headers: { "Idempotency-Key": k },
    });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(first.text);
  });

  it("a 100-item ticket batch: the record stays within the bound, and the replay after later writes is identical", async () => {
    const k = `batch-${randomBytes(4).toString("hex")}`;
    const items = batchItems().map((x, i) => (i % 10 === 0 ? { ...x, subject: `${x.subject} (v2)` } : x));
    const first = await req("POST", "/tickets/batch/upsert", { body: { items }, headers: { "Idempotency-Key": k } });
    expect(first.status).toBe(200);
    expect(Buffer.byteLength(first.text)).toBeGreaterThan(3 * 1024 * 1024);
    expect(
      first.body.results
        .filter((x: { index: number }) => x.index % 10 === 0)
        .every((x: { status: string }) => x.status === "updated"),
    ).toBe(true);
    expect(await recordBytes(k)).toBeLessThanOrEqual(RECORD_MAX_BYTES);
    const some = first.body.results.slice(0, 5).map((x: { id: string }) => x.id);
    for (const id of some) {
      expect((await req("PATCH", `/tickets/${id}`, { body: { subject: "Changed since" } })).status).toBe(200);
      expect((await req("POST", `/tickets/${id}/comments`, { body: { body: "new" } })).status).toBe(201);
    }
    const again = await req("POST", "/tickets/batch/upsert", { body: { items }, headers: { "Idempotency-Key": k } });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(first.text);
  });

  it("a small keyed batch with failed items replays byte for byte (an item's details in the order its stored record keeps)", async () => {
    const k = `small-${randomBytes(4).toString("hex")}`;
    const items = [
      { externalId: "small-1", customerName: "A" },
      { externalId: "small-2", customerName: "B", rooms: "x", zones: 3 },
      { externalId: "small-1" },
    ];
    const first = await req("POST", "/leads/batch/upsert", { body: { items }, headers: { "Idempotency-Key": k } });
    expect(first.body.results.map((r: { status: string }) => r.status)).toEqual(["created", "failed", "failed"]);
    expect(first.body.results[1].error.details.fields.length).toBeGreaterThan(1);
    const again = await req("POST", "/leads/batch/upsert", { body: { items }, headers: { "Idempotency-Key": k } });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(first.text);
  });

  it("a lead batch of 100 full leads fits its record whole; leads too large for one record are cut there, the same in the replay", async () => {
    const lead = (i: number, notes: string) => ({
      externalId: `rec-${i}`,
      customerName: `Customer ${i}`,
      customerEmail: `c${i}@example.test`,
      customerPhone: "+34600000001",
      intent: "buy",
      quality: "hot",
      budget: { min: 100_000, max: 250_000 },
      zones: ["centro", "norte", "playa"],
      rooms: 3,
      notes,
    });
    const k = `leads-${randomBytes(4).toString("hex")}`;
    const full = await req("POST", "/leads/batch/upsert", {
      body: { items: Array.from({ length: 100 }, (_, i) => lead(i, `Notes ${i}`)) },
      headers: { "Idempotency-Key": k },
    });
    expect(full.status).toBe(200);
    expect(
      full.body.results.every((x: { status: string; item: unknown }) => x.status === "created" && x.item !== null),
    ).toBe(true);
    expect(await recordBytes(k)).toBeLessThanOrEqual(RECORD_MAX_BYTES);

    // 20 leads of 9,000 incompressible characters of notes: ~180 KB of answer, more than one record holds.
    const k2 = `leads-big-${randomBytes(4).toString("hex")}`;
    const big = Array.from({ length: 20 }, (_, i) => lead(1000 + i, text(9_000)));
    const first = await req("POST", "/leads/batch/upsert", {
      body: { items: big },
      headers: { "Idempotency-Key": k2 },
    });
    expect(first.status).toBe(200);
    const kept = first.body.results.filter((x: { item: unknown }) => x.item !== null).length;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(20);
    expect(
      first.body.results
        .slice(kept)
        .every((x: { status: string; id: string; item: unknown }) => x.status === "created" && x.id && x.item === null),
    ).toBe(true);
    expect(await recordBytes(k2)).toBeLessThanOrEqual(RECORD_MAX_BYTES);
    const again = await req("POST", "/leads/batch/upsert", {
      body: { items: big },
      headers: { "Idempotency-Key": k2 },
    });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(first.text);
    // Without a key nothing is stored: the whole answer comes.
    const bare = await req("POST", "/leads/batch/upsert", { body: { items: big } });
    expect(
      bare.body.results.every((x: { status: string; item: unknown }) => x.status === "unchanged" && x.item !== null),
    ).toBe(true);
  });
});

describe("preconditions in batches", () => {
  it("an item's ifMatch: its version updates, another fails that item alone with 412 and currentVersion, nothing written for it", async () => {
    const t = await req("GET", `/tickets/${ids.tenants.acme!.tickets.t20}`);
    const v = t.body.version as number;
    const r = await req("POST", "/tickets/batch/upsert", {
      body: {
        items: [
          { externalId: hd(20), subject: "matched", customerId: bea(), ifMatch: v },
          { externalId: hd(21), subject: "stale", customerId: bea(), ifMatch: 999 },
          { externalId: "hd-new-ifmatch", subject: "new", customerId: bea(), ifMatch: 1 },
        ],
      },
    });
    expect(r.status).toBe(200);
    const [a, b, c] = r.body.results;
    expect(a).toMatchObject({ status: "updated", error: null, item: { subject: "matched", version: v + 1 } });
    expect(b).toMatchObject({ status: "failed", id: null, item: null, error: { error: "PRECONDITION_FAILED" } });
    expect(b.error.details.currentVersion).toEqual(expect.any(Number));
    expect(c).toMatchObject({
      status: "failed",
      item: null,
      error: { error: "PRECONDITION_FAILED", details: { currentVersion: null } },
    });
    const [stale] = await sql<{ subject: string }>(`SELECT "subject" FROM "Ticket" WHERE "externalId" = $1`, [hd(21)]);
    expect(stale!.subject).toBe("Ticket 21");
    expect(await sql(`SELECT 1 FROM "Ticket" WHERE "externalId" = 'hd-new-ifmatch'`)).toHaveLength(0);
  });

  it("an item with ifMatch is never created by a contact batch's bulk insert", async () => {
    const r = await req("POST", "/contacts/batch/upsert", {
      body: {
        items: [
          { externalId: "c-if-1", phone: "+34611100001", ifMatch: 1 },
          { externalId: "c-if-2", phone: "+34611100002" },
        ],
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.results[0]).toMatchObject({
      status: "failed",
      error: { error: "PRECONDITION_FAILED", details: { currentVersion: null } },
    });
    expect(r.body.results[1]).toMatchObject({ status: "created" });
    expect(await sql(`SELECT 1 FROM "Contact" WHERE "externalId" = 'c-if-1'`)).toHaveLength(0);
    const bad = await req("POST", "/contacts/batch/upsert", {
      body: { items: [{ externalId: "c-if-3", phone: "+34611100003", ifMatch: "1" }] },
    });
    expect(bad.body.results[0]).toMatchObject({ status: "failed", error: { error: "VALIDATION_ERROR" } });
  });

  it("an If-Match or If-None-Match header on a batch is a 422 naming it, with nothing written", async () => {
    for (const header of ["If-Match", "If-None-Match"]) {
      const r = await req("POST", "/leads/batch/upsert", {
        body: { items: [{ externalId: `hdr-${header}`, customerName: "X" }] },
        headers: { [header]: '"999"' },
      });
      const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
      expect(b.details.fields[0]).toMatchObject({ field: header, code: "invalid_header" });
      expect(await sql(`SELECT 1 FROM "Lead" WHERE "externalId" = $1`, [`hdr-${header}`])).toHaveLength(0);
    }
  });
});
