// The byte budget of every list page (routers/_lib/page-budget.ts), through HTTP on
// both backends: tickets whose threads exceed the budget, the changes feed, messages, leads,
// appointments, contacts and conversations — a page that reaches the budget holds fewer than `limit`
// items (at least one) with hasNext/hasMore true and `total` unchanged, its body is within the budget,
// and paging by offset += items.length (or the cursor, or nextSince) returns every item exactly once.
// Also: the statement loads about what the page returns (the rows the raw runner receives), the SQL
// sizes bound the JSON (JSON ≤ exact ≤ ub), the cut is tight (a page of ASCII threads is sized by
// its real bytes, not the worst case), and an item larger than the budget by itself comes alone.
// (The memory of 4 concurrent worst-case pages is measured by scripts/page-memory.ts, not here.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "../../generated/prisma/client.js";
import type { LoadResult } from "../../server/admin/fixture.js";
import type { SqlRunner } from "../../server/db/client.js";
import {
  appointmentSize,
  batchShare,
  contactSize,
  conversationSize,
  ITEMS_BUDGET_BYTES,
  leadSize,
  messageSize,
  PAGE_BUDGET_BYTES,
  ticketSize,
  type ItemSize,
} from "../../routers/_lib/page-budget.js";
import { TICKET_COMMENTS_MAX, TICKET_THREAD_CHARS_MAX } from "../../routers/tickets/schemas.js";
import { MAX_BATCH_CALLS } from "../../rest/trpc.js";
import { startApp, untimed, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;
const acme = () => ids.tenants.acme!;
const key = () => acme().apiKeys.full!.key;

const CONTACTS = ["worst", "ascii", "feed", "leads", "appts", "convs", "huge", "mixed", "sizes"] as const;

beforeAll(async () => {
  // Its statements are watched on app.db: every request on the coordinator's pool, also with DATABASE_ROUTING=workers.
  app = await startApp({ config: { databaseRouting: "coordinator" } });
  ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: { perMinute: 1_000_000, perDay: 100_000_000 },
        contacts: CONTACTS.map((ref, i) => ({
          ref,
          fullName: `Contact ${ref}`,
          phone: `+346000000${String(i + 10).padStart(2, "0")}`,
        })),
        contactLists: [{ ref: "big", name: "Big names" }],
        conversations: [
          {
            ref: "talk",
            channel: "site",
            identity: { externalId: "web-talk", name: "Talker", contact: "convs" },
            messages: [],
          },
          {
            ref: "sizes",
            channel: "site",
            identity: { externalId: "web-sizes", name: "Sizer", contact: "sizes" },
            messages: [],
          },
        ],
      }),
      tenant("beta", {
        rateLimit: { perMinute: 1_000_000, perDay: 100_000_000 },
        contacts: [{ ref: "big", fullName: "Big threads", phone: "+34600000099" }],
      }),
    ),
  );
}, 60_000);
afterAll(() => app?.close());

/** Test data and inspection straight in the database (no statement_timeout: helpers/app.ts untimed). */
const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => untimed(app.db)<T>(text, params);
const C = "\u0001";

// ---- data (straight in the database, through its triggers: counters, thread bounds, the feed) ------

/** n tickets of a contact, `age` + 1, + 2, … seconds old (the first id is the newest). */
async function tickets(contact: string, n: number, subject = "Ticket", age = 0): Promise<string[]> {
  const rows = await sql<{ id: string }>(
    `INSERT INTO "Ticket" ("tenantId", "subject", "createdById", "customerId", "createdAt")
     SELECT $1::uuid, $4 || ' ' || i, $2::uuid, $3::uuid, now() - ($6::int + i) * interval '1 second'
       FROM generate_series(1, $5::int) i
     RETURNING "id"`,
    [acme().id, acme().users.ana, acme().contacts[contact], subject, n, age],
  );
  return rows.map((r) => r.id);
}

/** Comments straight in the database, as test/db/ticket-threads.test.ts's fill(): n of `body` on each ticket. */
async function fill(ticketIds: string[], n: number, body: string) {
  await sql(
    `INSERT INTO "TicketComment" ("tenantId", "ticketId", "authorUserId", "body", "createdAt")
     SELECT $1::uuid, t.id, $2::uuid, $3, now() - interval '1 day' + i * interval '1 millisecond'
       FROM unnest($4::uuid[]) t(id), generate_series(1, $5::int) i`,
    [acme().id, acme().users.ana, body, ticketIds, n],
  );
}

/** Every thread at both bounds (500 comments, 150,000 characters), every character U+0001: ~980 KB of JSON a ticket. */
async function worstThreads(ticketIds: string[]) {
  const heavy = Math.floor((TICKET_THREAD_CHARS_MAX - TICKET_COMMENTS_MAX) / 10_000); // 14 of 10,000
  const light = TICKET_COMMENTS_MAX - heavy - 1;
  await fill(ticketIds, light, C);
  await fill(ticketIds, heavy, C.repeat(10_000));
  await fill(ticketIds, 1, C.repeat(TICKET_THREAD_CHARS_MAX - light - heavy * 10_000));
}

// ---- walking a list --------------------------------------------------------------------------------

interface Walked {
  pages: { count: number; bytes: number; hasNext: boolean; total?: number; pageSize?: number }[];
  items: any[];
}

/** Pages through an offset list with offset += items.length until hasNext is false. */
async function walk(path: string, query: Record<string, string | number> = {}, limit = 200): Promise<Walked> {
  const out: Walked = { pages: [], items: [] };
  for (let offset = 0; out.pages.length < 1000; ) {
    const r = await app.request("GET", path, { key: key(), query: { ...query, offset, limit } });
    expect(r.status, r.text.slice(0, 200)).toBe(200);
    out.pages.push({
      count: r.body.items.length,
      bytes: Buffer.byteLength(r.text),
      hasNext: r.body.pagination.hasNext,
      total: r.body.total,
      pageSize: r.body.pagination.pageSize,
    });
    out.items.push(...r.body.items);
    offset += r.body.items.length;
    if (!r.body.pagination.hasNext) return out;
  }
  throw new Error("no end");
}

/**
 * Every page within the budget, at least one item, fewer than the limit
 * while more follow (the budget cut it), `total` the same throughout.
 */
function expectBudgetPages(w: Walked, total: number, limit = 200) {
  for (const [i, p] of w.pages.entries()) {
    expect(p.bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
    expect(p.count).toBeGreaterThanOrEqual(1);
    expect(p.total).toBe(total);
    expect(p.pageSize).toBe(limit);
    expect(p.hasNext).toBe(i < w.pages.length - 1);
  }
  expect(w.pages.length).toBeGreaterThan(1);
  // A cut page: fewer than `limit` items, yet more follow.
  expect(w.pages.some((p) => p.count < limit && p.hasNext)).toBe(true);
  const seen = w.items.map((x) => x.id);
  expect(new Set(seen).size).toBe(seen.length);
  expect(seen).toHaveLength(total);
}

/**
 * The bytes the raw runner hands back while `fn` runs, for the statements whose text matches
 * `which` (the rows as JSON: about what the server holds of them).
 */
async function loadedBytes<T>(which: RegExp, fn: () => Promise<T>): Promise<{ result: T; bytes: number }> {
  const runner = app.db.sql as SqlRunner;
  const query = runner.query;
  let bytes = 0;
  // A value's bytes: a string as it is (a json column may come unparsed), anything else as JSON.
  const size = (v: unknown) =>
    typeof v === "string" ? Buffer.byteLength(v) : Buffer.byteLength(JSON.stringify(v) ?? "");
  runner.query = async function (this: SqlRunner, text: string, params?: unknown[], opts?: unknown) {
    const rows = await query.call(this, text, params, opts as never);
    if (which.test(text))
      for (const r of rows as Record<string, unknown>[]) for (const v of Object.values(r)) bytes += size(v);
    return rows;
  } as SqlRunner["query"];
  try {
    return { result: await fn(), bytes };
  } finally {
    runner.query = query;
  }
}

// ---- tickets ---------------------------------------------------------------------------------------

describe("tickets with threads past the budget", () => {
  it("pages of fewer than limit, hasNext true, total unchanged, each ticket exactly once; the statement loads only what the page returns", async () => {
    const contact = acme().contacts.worst!;
    const small = await tickets("worst", 3, "Small", 100); // older than the worst ones: the last page
    const worst = await tickets("worst", 12, "Worst");
    await worstThreads(worst);
    await fill(small, 2, "a short comment");

    const { result: w, bytes } = await loadedBytes(/"Ticket"/, () =>
      walk("/public/v1/tickets", { customerId: contact }),
    );
    expectBudgetPages(w, 15);
    // A worst-case ticket is ~980 KB of JSON: four fit in a page, five do not.
    expect(w.pages.map((p) => p.count)).toEqual([4, 4, 4 + 3]);
    // Every ticket whole: the same objects, in the same order, as one ticket per page.
    const one = await walk("/public/v1/tickets", { customerId: contact }, 1);
    expect(w.items).toEqual(one.items);
    expect(w.items.filter((t) => t.comments.length === TICKET_COMMENTS_MAX)).toHaveLength(12);
    // The rows the list statements returned are about the bodies sent (no thread loaded and dropped).
    const sent = w.pages.reduce((s, p) => s + p.bytes, 0);
    expect(bytes).toBeLessThan(sent * 1.25);
  }, 240_000);

  it("the cut is tight: threads of plain text are sized by their real bytes, not six per character", async () => {
    const ascii = await tickets("ascii", 30, "Plain");
    // ~160 KB of JSON a ticket (the worst case of 150,000 characters would be ~980 KB); 50 long
    // comments rather than 500 short ones: the same bytes at a tenth of the rows' triggers.
    await fill(ascii, 50, "x".repeat(3000));
    const w = await walk("/public/v1/tickets", { customerId: acme().contacts.ascii! });
    expectBudgetPages(w, 30);
    const perTicket = Buffer.byteLength(JSON.stringify(w.items[0])) + 1;
    const fit = Math.floor((PAGE_BUDGET_BYTES - 1024) / perTicket);
    expect(fit).toBeGreaterThanOrEqual(18);
    expect(w.pages[0]!.count).toBe(fit);
    expect(w.pages[0]!.bytes + perTicket).toBeGreaterThan(ITEMS_BUDGET_BYTES);
  }, 240_000);

  it("a page far from the budget is as before: limit items, hasNext from the total", async () => {
    const contact = acme().contacts.mixed!;
    await tickets("mixed", 3, "Few");
    const r = await app.request("GET", "/public/v1/tickets", { key: key(), query: { customerId: contact, limit: 2 } });
    expect(r.status).toBe(200);
    expect(r.body.items).toHaveLength(2);
    expect(r.body.total).toBe(3);
    expect(r.body.pagination).toEqual({
      page: 1,
      pageSize: 2,
      totalItems: 3,
      totalPages: 2,
      hasNext: true,
      hasPrev: false,
    });
    const last = await app.request("GET", "/public/v1/tickets", {
      key: key(),
      query: { customerId: contact, limit: 2, offset: 2 },
    });
    expect(last.body.items).toHaveLength(1);
    expect(last.body.pagination).toEqual({
      page: 2,
      pageSize: 2,
      totalItems: 3,
      totalPages: 2,
      hasNext: false,
      hasPrev: true,
    });
  });
});

// ---- the changes feed ------------------------------------------------------------------------------

describe("the changes feed", () => {
  // The feed's loads: one statement per type, of the page's ids (routers/changes/list.ts loadObjects).
  const FEED_LOAD = /"tenantId" = \$\d+::uuid AND "id" IN \(/;
  async function drain(since?: string) {
    const pages: { bytes: number; items: any[]; hasMore: boolean }[] = [];
    for (; pages.length < 1000; ) {
      const r = await app.request("GET", "/public/v1/changes", {
        key: key(),
        query: { limit: 500, types: "ticket,lead", ...(since ? { since } : {}) },
      });
      expect(r.status, r.text.slice(0, 200)).toBe(200);
      pages.push({ bytes: Buffer.byteLength(r.text), items: r.body.items, hasMore: r.body.hasMore });
      since = r.body.nextSince;
      if (!r.body.hasMore) return { pages, since, items: pages.flatMap((p) => p.items) };
    }
    throw new Error("no end");
  }

  it("every change exactly once across pages within the budget; it loads about what it returns", async () => {
    const tip = (await drain()).since;
    // ~8.9 MB in all, so at least three pages: 6 worst tickets (~1 MB each, 500 comments: the rows
    // that cost, through their triggers) and 300 wordy leads (one row each).
    const worst = await tickets("feed", 6, "Feed");
    await worstThreads(worst);
    // Plain notes: ~10 KB of JSON a lead, 60 KB by the upper bound (the exact sizes decide).
    const leads = await sql<{ id: string }>(
      `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "customerId", "notes")
       SELECT $1::uuid, 'Wordy ' || i, $2::uuid, $3::uuid, repeat('y', 10000) FROM generate_series(1, 300) i
         RETURNING "id"`,
      [acme().id, acme().stages.new, acme().contacts.feed],
    );
    const { result: r, bytes } = await loadedBytes(FEED_LOAD, () => drain(tip));
    expect(r.pages.length).toBeGreaterThanOrEqual(3);
    for (const [i, p] of r.pages.entries()) {
      expect(p.bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
      expect(p.items.length).toBeGreaterThanOrEqual(1);
      expect(p.hasMore).toBe(i < r.pages.length - 1);
    }
    const keys = r.items.map((i) => `${i.type}:${i.id}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(new Set(keys)).toEqual(new Set([...worst.map((id) => `ticket:${id}`), ...leads.map((l) => `lead:${l.id}`)]));
    expect(
      r.items.filter((i) => i.type === "ticket").every((i) => i.data.comments.length === TICKET_COMMENTS_MAX),
    ).toBe(true);
    // The objects loaded are the objects returned (sized before loading).
    const sent = r.pages.reduce((s, p) => s + p.bytes, 0);
    expect(bytes).toBeLessThan(sent * 1.25);
    // And the pages are full: each holds what fits (its next item, ~1 MB at most, would not; sizes count
    // up to ~100 bytes an item more than the JSON).
    expect(r.pages.length).toBeLessThanOrEqual(Math.floor(sent / (PAGE_BUDGET_BYTES - 1_100_000)) + 1);
  }, 300_000);

  it("an object that grows between its sizing and its loading is measured as loaded: the page stays within the budget, the object comes again", async () => {
    const tip = (await drain()).since;
    // One statement each: their feed positions follow this order.
    const ids: string[] = [];
    for (const i of [1, 2, 3]) {
      const [lead] = await sql<{ id: string }>(
        `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "customerId")
         VALUES ($1::uuid, $4, $2::uuid, $3::uuid) RETURNING "id"`,
        [acme().id, acme().stages.new, acme().contacts.feed, `Racer ${i}`],
      );
      ids.push(lead!.id);
    }
    // Just before the objects are loaded (the positions and their sizes are read by then), the second
    // lead's notes become 5 MB: it has changed since it was sized, and counts as loaded.
    const runner = app.db.sql as SqlRunner;
    const query = runner.query;
    let grown = false;
    runner.query = async function (this: SqlRunner, text: string, params?: unknown[], opts?: unknown) {
      if (!grown && FEED_LOAD.test(text)) {
        grown = true;
        await query.call(
          this,
          `UPDATE "Lead" SET "notes" = repeat('z', 5000000) WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
          [acme().id, ids[1]],
        );
      }
      return query.call(this, text, params, opts as never);
    } as SqlRunner["query"];
    let r: Awaited<ReturnType<typeof drain>>;
    try {
      r = await drain(tip);
    } finally {
      runner.query = query;
    }
    expect(grown).toBe(true);
    const first = r.pages[0]!;
    expect(first.bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
    expect(first.hasMore).toBe(true);
    expect(first.items.map((i) => i.id)).toEqual([ids[0]]);
    // Every lead comes; the grown one with its notes as they are now (alone on its page: larger than the budget).
    expect(new Set(r.items.map((i) => i.id))).toEqual(new Set(ids));
    const last = r.items.filter((i) => i.id === ids[1]).at(-1)!;
    expect(last.data.notes).toHaveLength(5_000_000);
  }, 60_000);
});

// ---- messages, leads, appointments, contacts, conversations ------------------------------------------

describe("the other lists", () => {
  it("messages at the API's content bound (4,096 × U+0001): a cut page has hasMore and a nextCursor; every message once", async () => {
    const conversation = acme().conversations.talk!;
    const n = 210;
    await sql(
      `INSERT INTO "Message" ("tenantId", "conversationId", "role", "content", "deliveryStatus", "createdAt")
       SELECT $1::uuid, $2::uuid, 'user', repeat(chr(1), 4096), 'received', now() - i * interval '1 second'
         FROM generate_series(1, $3::int) i`,
      [acme().id, conversation, n],
    );
    const seen: string[] = [];
    const counts: number[] = [];
    let cursor: string | undefined;
    for (;;) {
      const r = await app.request("GET", `/public/v1/conversations/${conversation}/messages`, {
        key: key(),
        query: { limit: 200, ...(cursor ? { cursor } : {}) },
      });
      expect(r.status).toBe(200);
      expect(Buffer.byteLength(r.text)).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
      counts.push(r.body.items.length);
      seen.push(...r.body.items.map((m: any) => m.id));
      expect(r.body.pagination.hasMore).toBe(r.body.pagination.nextCursor !== null);
      if (!r.body.pagination.hasMore) break;
      cursor = r.body.pagination.nextCursor;
    }
    expect(counts[0]).toBeLessThan(200);
    expect(counts[0]).toBeGreaterThan(150); // ~24.7 KB a message: 169 fit
    expect(new Set(seen).size).toBe(n);
    expect(seen).toHaveLength(n);
  }, 60_000);

  it("leads with notes at the API's bound (10,000 × U+0001)", async () => {
    const contact = acme().contacts.leads!;
    await sql(
      `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "customerId", "notes", "zones", "createdAt")
       SELECT $1::uuid, 'Lead ' || i, $2::uuid, $3::uuid, repeat(chr(1), 10000), ARRAY['a"b', 'c\\d'],
         now() - i * interval '1 second'
         FROM generate_series(1, 120) i`,
      [acme().id, acme().stages.new, contact],
    );
    const w = await walk("/public/v1/leads", { customerId: contact });
    expectBudgetPages(w, 120);
    expect(w.pages[0]!.count).toBeGreaterThan(60); // ~60.4 KB a lead: 69 fit
  }, 60_000);

  it("a /trpc batch of 20 list calls answers within one page budget: each call a share (fewer items, hasNext), every lead still reachable", async () => {
    const contact = acme().contacts.leads!; // the 120 leads of ~60 KB above
    const calls = 20;
    const input = Object.fromEntries(
      Array.from({ length: calls }, (_, i) => [String(i), { limit: 100, customerId: contact }]),
    );
    const url = `${app.url}/trpc/${Array(calls).fill("leads.list").join(",")}?batch=1&input=${encodeURIComponent(JSON.stringify(input))}`;
    const res = await fetch(url, { headers: { "X-API-Key": key() } });
    const text = await res.text();
    expect(res.status, text.slice(0, 300)).toBe(200);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
    const results = JSON.parse(text) as {
      result: { data: { items: { id: string }[]; pagination: { hasNext: boolean }; total: number } };
    }[];
    expect(results).toHaveLength(calls);
    for (const r of results) {
      expect(r.result.data.items.length).toBeGreaterThanOrEqual(1);
      expect(r.result.data.items.length).toBeLessThan(10); // ~60 KB a lead in a share of ~204 KB
      expect(r.result.data.pagination.hasNext).toBe(true);
      expect(r.result.data.total).toBe(120);
    }
    // The same call alone has the whole budget.
    const alone = await fetch(
      `${app.url}/trpc/leads.list?input=${encodeURIComponent(JSON.stringify({ limit: 100, customerId: contact }))}`,
      { headers: { "X-API-Key": key() } },
    );
    expect(
      ((await alone.json()) as { result: { data: { items: unknown[] } } }).result.data.items.length,
    ).toBeGreaterThan(60);
  }, 60_000);

  it("a /trpc batch answers one item larger than a call's share, for one call: the others answer none, with a continuation; alone each answers it", async () => {
    const beta = ids.tenants.beta!;
    const betaKey = beta.apiKeys.full!.key;
    // Two tickets of ~900 KB of JSON each (150,000 × U+0001), far past a share of a 20-call batch (~204 KB).
    const made = await sql<{ id: string }>(
      `INSERT INTO "Ticket" ("tenantId", "subject", "createdById", "customerId")
       SELECT $1::uuid, 'Big ' || i, $2::uuid, $3::uuid
         FROM generate_series(1, 2) i RETURNING "id"`,
      [beta.id, beta.users.ana, beta.contacts.big],
    );
    await sql(
      `INSERT INTO "TicketComment" ("tenantId", "ticketId", "authorUserId", "body", "createdAt")
       SELECT $1::uuid, t.id, $2::uuid, repeat(E'\\x01', 10000), now() - interval '1 day' + i * interval '1 millisecond'
         FROM unnest($3::uuid[]) t(id), generate_series(1, 15) i`,
      [beta.id, beta.users.ana, made.map((t) => t.id)],
    );
    const trpc = async (paths: string[], inputs: unknown[]) => {
      const input = Object.fromEntries(inputs.map((v, i) => [String(i), v]));
      const batched = paths.length > 1 ? "batch=1&" : "";
      const res = await fetch(
        `${app.url}/trpc/${paths.join(",")}?${batched}input=${encodeURIComponent(JSON.stringify(paths.length > 1 ? input : inputs[0]))}`,
        {
          headers: { "X-API-Key": betaKey },
        },
      );
      const text = await res.text();
      expect(res.status, text.replace(/"items":\[[^\]]*\]/g, "…").slice(0, 2000)).toBe(200);
      return { bytes: Buffer.byteLength(text), body: JSON.parse(text) };
    };
    const list = { limit: 1, customerId: beta.contacts.big };
    const feed = { limit: 1, types: "ticket" };
    const paths = [...Array(10).fill("tickets.list"), ...Array(10).fill("changes.list")];
    const inputs = [...Array(10).fill(list), ...Array(10).fill(feed)];
    const { bytes, body } = await trpc(paths, inputs);
    const pages = (
      body as {
        result: {
          data: { items: unknown[]; pagination?: { hasNext: boolean }; hasMore?: boolean; nextSince?: string };
        };
      }[]
    ).map((r) => r.result.data);
    // One call of the batch answered its ~900 KB ticket; the batch's answer is one budget plus that one item.
    expect(pages.filter((p) => p.items.length === 1)).toHaveLength(1);
    expect(bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES + 1_000_000);
    for (const [i, p] of pages.entries()) {
      if (p.items.length === 1) continue;
      expect(p.items).toHaveLength(0);
      if (i < 10) expect(p.pagination!.hasNext).toBe(true);
      else expect(p.hasMore).toBe(true);
    }
    // Sent alone, the same calls answer their ticket; the empty feed page's nextSince continues where it started.
    const alone = (await trpc(["tickets.list"], [list])).body.result.data;
    expect(alone.items).toHaveLength(1);
    const emptyFeed = pages.slice(10).find((p) => p.items.length === 0)!;
    const next = (await trpc(["changes.list"], [{ ...feed, since: emptyFeed.nextSince }])).body.result.data;
    expect(next.items).toHaveLength(1);
    expect(next.items[0].id).toBe((await trpc(["changes.list"], [feed])).body.result.data.items[0].id);
  }, 120_000);

  it("the widest lead the API accepts (every text at its bound, U+0001 throughout) is below the smallest /trpc share", async () => {
    const c = (n: number) => C.repeat(n);
    const body = {
      customerName: c(255),
      customerEmail: c(320),
      customerPhone: c(20),
      intent: c(50),
      quality: c(50),
      zones: Array.from({ length: 50 }, () => c(100)),
      notes: c(10_000),
      externalId: `x${"y".repeat(254)}`,
    };
    const r = await app.request("POST", "/public/v1/leads", { key: key(), body });
    expect(r.status, r.text.slice(0, 200)).toBe(201);
    // Only tickets (and the feed, which carries them) can pass a share: oversizedAllowed's premise.
    expect(Buffer.byteLength(r.text)).toBeGreaterThan(90_000);
    expect(Buffer.byteLength(r.text)).toBeLessThan(batchShare(MAX_BATCH_CALLS));
  });

  it("appointments with notes at the API's bound (10,000 × U+0001)", async () => {
    const contact = acme().contacts.appts!;
    await sql(
      `INSERT INTO "Appointment" ("tenantId", "assignedUserId", "customerId", "title", "appointmentType", "startsAt",
       "endsAt", "status", "notes")
       SELECT $1::uuid, $2::uuid, $3::uuid, 'Visit ' || i, 'visit', timestamptz '2027-01-01' + i * interval '1 hour',
              timestamptz '2027-01-01' + i * interval '1 hour' + interval '30 minutes', 'cancelled', repeat(chr(1),
                10000)
         FROM generate_series(1, 120) i`,
      [acme().id, acme().users.ana, contact],
    );
    expectBudgetPages(await walk("/public/v1/appointments", { customerId: contact }), 120);
  }, 60_000);

  it("contacts and conversations past the API's bounds (written by an operator in SQL)", async () => {
    // A contact's and a conversation's texts are bounded only by the API's inputs (a 255-character
    // name, a 200-character preview): rows written otherwise are still cut to the budget.
    const list = acme().contactLists.big!;
    await sql(
      `WITH c AS (INSERT INTO "Contact" ("tenantId", "fullName") SELECT $1::uuid, repeat('n', 100000) || i
       FROM generate_series(1, 60) i RETURNING "id")
       INSERT INTO "ContactListMember" ("tenantId", "listId", "contactId") SELECT $1::uuid, $2::uuid, c."id" FROM c`,
      [acme().id, list],
    );
    expectBudgetPages(await walk("/public/v1/contacts", { listId: list }), 60);
    // The keyset cursor too: a cut page has a nextCursor, and following it returns every contact once.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let n = 0; n < 100; n++) {
      const r = await app.request("GET", "/public/v1/contacts", {
        key: key(),
        query: { listId: list, limit: 200, ...(cursor ? { cursor } : {}) },
      });
      expect(r.status).toBe(200);
      expect(Buffer.byteLength(r.text)).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
      seen.push(...r.body.items.map((c: any) => c.id));
      expect(r.body.pagination.hasNext).toBe(r.body.nextCursor !== null);
      if (r.body.nextCursor === null) break;
      cursor = r.body.nextCursor;
    }
    expect(new Set(seen).size).toBe(60);
    expect(seen).toHaveLength(60);

    const talk = acme().conversations.talk!;
    await sql(
      `INSERT INTO "Conversation" ("tenantId", "channelId", "customerId", "subject", "lastMessageAt")
       SELECT v."tenantId", v."channelId", v."customerId", repeat(chr(1), 30000) || i, now() - i * interval '1 second'
         FROM "Conversation" v, generate_series(1, 60) i WHERE v."tenantId" = $1::uuid AND v."id" = $2::uuid`,
      [acme().id, talk],
    );
    expectBudgetPages(await walk("/public/v1/conversations", { customerId: acme().contacts.convs! }), 61);
  }, 60_000);

  it("an item larger than the budget by itself (notes written in SQL, past the API's bound) comes alone on its page", async () => {
    const contact = acme().contacts.huge!;
    await sql(
      `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "customerId", "notes", "createdAt")
       VALUES ($1::uuid, 'Newest', $2::uuid, $3::uuid, 'small', now()),
              ($1::uuid, 'Huge', $2::uuid, $3::uuid, repeat('h', 5000000), now() - interval '1 second'),
              ($1::uuid, 'Oldest', $2::uuid, $3::uuid, 'small', now() - interval '2 seconds')`,
      [acme().id, acme().stages.new, contact],
    );
    const w = await walk("/public/v1/leads", { customerId: contact });
    expect(w.items.map((l) => l.customerName)).toEqual(["Newest", "Huge", "Oldest"]);
    expect(w.pages.map((p) => [p.count, p.hasNext])).toEqual([
      [1, true],
      [1, true],
      [1, false],
    ]);
    expect(w.pages[1]!.bytes).toBeGreaterThan(PAGE_BUDGET_BYTES);
  }, 60_000);
});

// ---- the sizes in SQL -------------------------------------------------------------------------------

describe("the sizes computed in SQL bound each item's JSON", () => {
  const EDGE = [
    "plain",
    'quote " and backslash \\',
    "new\nline\ttab\r\b\f",
    `${C}\u001f`,
    "émoji 😀 ✓",
    "\u007f\u2028",
    "",
  ];

  /** JSON + 1 (its comma) ≤ exact ≤ ub, and exact within a few nullable fields of the JSON. */
  async function check(page: Prisma.Sql, size: ItemSize, items: any[]) {
    const q = Prisma.sql`SELECT p."id", ${size.ub} AS "ub", ${size.exact} AS "exact" FROM (${page}) p`;
    const rows = await sql<{ id: string; ub: string; exact: string }>(q.text, q.values);
    expect(items.length).toBeGreaterThan(0);
    expect(rows.length).toBe(items.length);
    for (const item of items) {
      const row = rows.find((r) => r.id === item.id)!;
      const json = Buffer.byteLength(JSON.stringify(item)) + 1;
      const [exact, ub] = [Number(row.exact), Number(row.ub)];
      expect(exact, `exact of ${item.id}`).toBeGreaterThanOrEqual(json);
      expect(ub, `ub of ${item.id}`).toBeGreaterThanOrEqual(exact);
      expect(exact - json, `slack of ${item.id}`).toBeLessThanOrEqual(250);
    }
  }

  it("for every list's items, with quotes, backslashes, control characters, emoji and nulls", async () => {
    const t = acme();
    const contact = t.contacts.sizes!;
    const conversation = t.conversations.sizes!;
    for (const [i, s] of EDGE.entries()) {
      await sql(
        `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "customerId", "notes", "customerEmail", "zones",
         "intent")
         VALUES ($1::uuid, $2 || 'n', $3::uuid, $4::uuid, CASE WHEN $5::int % 2 = 0 THEN $2 END, CASE
           WHEN $5::int % 3 = 0 THEN $2 END, ARRAY[$2, 'z'], $2 || 'i')`,
        [t.id, s, t.stages.new, contact, i],
      );
      await sql(
        `INSERT INTO "Appointment" ("tenantId", "assignedUserId", "customerId", "title", "appointmentType", "startsAt",
         "endsAt", "status", "notes")
         VALUES ($1::uuid, $2::uuid, $3::uuid, $4 || 't', $4 || 'a',
           timestamptz '2028-01-01' + $5::int * interval '1 hour',
                 timestamptz '2028-01-01' + $5::int * interval '1 hour' + interval '1 minute', 'completed', CASE
                   WHEN $5::int % 2 = 1 THEN $4 END)`,
        [t.id, t.users.ana, contact, s, i],
      );
      await sql(
        `INSERT INTO "Message" ("tenantId", "conversationId", "role", "content", "deliveryStatus")
         VALUES ($1::uuid, $2::uuid, 'user', $3 || 'm', 'received')`,
        [t.id, conversation, s],
      );
      const [ticket] = await tickets("sizes", 1, `${s}s`);
      if (i % 2 === 0) await fill([ticket!], 3, `${s}c`);
    }
    await sql(`UPDATE "Contact" SET "fullName" = $2, "email" = NULL WHERE "tenantId" = $1::uuid AND "id" = $3::uuid`, [
      t.id,
      EDGE.join("|"),
      contact,
    ]);
    await sql(`UPDATE "Conversation" SET "subject" = $2 WHERE "tenantId" = $1::uuid AND "id" = $3::uuid`, [
      t.id,
      EDGE.join("~"),
      conversation,
    ]);

    const list = async (path: string, query: Record<string, string>) =>
      (await app.request("GET", path, { key: key(), query: { ...query, limit: 200 } })).body.items as any[];
    await check(
      Prisma.sql`SELECT * FROM "Lead" WHERE "tenantId" = ${t.id}::uuid AND "customerId" = ${contact}::uuid`,
      leadSize(),
      await list("/public/v1/leads", { customerId: contact }),
    );
    await check(
      Prisma.sql`SELECT * FROM "Appointment" WHERE "tenantId" = ${t.id}::uuid AND "customerId" = ${contact}::uuid`,
      appointmentSize(),
      await list("/public/v1/appointments", { customerId: contact }),
    );
    await check(
      Prisma.sql`SELECT * FROM "Message" WHERE "tenantId" = ${t.id}::uuid AND "conversationId" = ${conversation}::uuid`,
      messageSize(),
      await list(`/public/v1/conversations/${conversation}/messages`, {}),
    );
    await check(
      Prisma.sql`SELECT * FROM "Ticket" WHERE "tenantId" = ${t.id}::uuid AND "customerId" = ${contact}::uuid`,
      ticketSize(t.id),
      await list("/public/v1/tickets", { customerId: contact }),
    );
    await check(
      Prisma.sql`SELECT * FROM "Contact" WHERE "tenantId" = ${t.id}::uuid AND "id" = ${contact}::uuid`,
      contactSize(),
      // Found by its phone (other tests' large contacts fill the first pages).
      (await list("/public/v1/contacts", { search: `+346000000${CONTACTS.indexOf("sizes") + 10}` })).filter(
        (c) => c.id === contact,
      ),
    );
    await check(
      Prisma.sql`SELECT v.*, cu."name" AS "customerName", cu."email" AS "customerEmail", cu."phone" AS "customerPhone"
         FROM "Conversation" v JOIN "Customer" cu ON cu."tenantId" = v."tenantId" AND cu."id" = v."customerId"
        WHERE v."tenantId" = ${t.id}::uuid AND v."id" = ${conversation}::uuid`,
      conversationSize(),
      (await list("/public/v1/conversations", { customerId: contact })).filter((c) => c.id === conversation),
    );
  }, 60_000);
});
