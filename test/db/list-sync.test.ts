// Incremental sync on every list of leads, contacts, conversations, appointments and tickets: `sort`
// (each value, ties by id in the same direction, anything else a 422 naming it), the update-time
// window (`updatedFrom` inclusive, `updatedTo` exclusive, reversed: a 422 naming both), repeated `id`
// and `externalId` (exact totals, unknown and other tenants' objects simply absent, more than 100 or
// both together: 422), keyset cursors (a walk equals the list; a cursor of another sort, other filters
// or another tenant: 422 naming `cursor`), an ascending walk that misses nothing written during it,
// and a request line naming 100 long external ids (fits; a longer one is a 431 with the envelope).
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { MAX_HEADER_BYTES } from "../../server/http-server.js";
import { expectEnvelope, startApp, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;
const N = 7;
const acme = () => ids.tenants.acme!;
const globex = () => ids.tenants.globex!;
const keyOf = (t: () => LoadResult["tenants"][string]) => t().apiKeys.full!.key;
const get = (path: string, key = keyOf(acme)) => app.request("GET", `/public/v1${path}`, { key });

type Item = Record<string, unknown> & { id: string; updatedAt: string; version: number };

interface ListCase {
  list: "leads" | "contacts" | "conversations" | "appointments" | "tickets";
  sorts: string[];
  fallback: string;
  external: boolean;
  /** A write that changes the object (its updatedAt and version move). */
  write: (id: string, n: number) => Promise<Response>;
}

const req = (method: string, path: string, body: unknown) =>
  app.request(method, `/public/v1${path}`, { key: keyOf(acme), body });

const LISTS: ListCase[] = [
  {
    list: "leads",
    sorts: ["createdAt", "updatedAt"],
    fallback: "-createdAt",
    external: true,
    write: (id, n) => req("PATCH", `/leads/${id}`, { notes: `note ${n}` }),
  },
  {
    list: "contacts",
    sorts: ["createdAt", "updatedAt"],
    fallback: "-createdAt",
    external: true,
    write: (id, n) => req("PATCH", `/contacts/${id}`, { fullName: `Name ${n}` }),
  },
  {
    list: "conversations",
    sorts: ["createdAt", "updatedAt", "lastMessageAt"],
    fallback: "-lastMessageAt",
    external: false,
    write: (id, n) => req("POST", `/conversations/${id}/messages`, { content: `Reply ${n}` }),
  },
  {
    list: "appointments",
    sorts: ["createdAt", "updatedAt", "startsAt"],
    fallback: "startsAt",
    external: false,
    write: (id, n) => req("PATCH", `/appointments/${id}`, { notes: `Notes ${n}` }),
  },
  {
    list: "tickets",
    sorts: ["createdAt", "updatedAt"],
    fallback: "-createdAt",
    external: true,
    write: (id, n) => req("PATCH", `/tickets/${id}`, { subject: `Subject ${n}` }),
  },
];

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const at = (day: number, hour = 10) =>
  `2026-11-${String(10 + day).padStart(2, "0")}T${String(hour).padStart(2, "0")}:00:00Z`;

/** A tenant with N objects of each kind; two leads and two tickets share a createdAt (ties by id). */
const data = (ref: string, phoneBase: number) =>
  tenant(ref, {
    rateLimit: { perMinute: 100_000, perDay: 1_000_000 },
    contacts: range(N).map((i) => ({
      ref: `c${i}`,
      fullName: `Contact ${i}`,
      phone: `+346${phoneBase + i}`,
      externalId: `${ref}-contact-${i}`,
    })),
    conversations: range(N).map((i) => ({
      ref: `v${i}`,
      channel: "site",
      identity: { externalId: `web-${ref}-${i}`, name: `C${i}`, phone: null, email: null, contact: `c${i}` },
      messages: [{ role: "user" as const, content: `Hi ${i}`, createdAt: at(i, 9 + (i % 3)) }],
    })),
    leads: range(N).map((i) => ({
      ref: `l${i}`,
      customerName: `Lead ${i}`,
      stage: "new",
      externalId: `${ref}-lead-${i}`,
      createdAt: at(i < 2 ? 0 : i),
    })),
    appointments: range(N).map((i) => ({
      ref: `a${i}`,
      assignedTo: "ana",
      title: `Visit ${i}`,
      appointmentType: "visit",
      startsAt: `2027-01-${String(4 + i).padStart(2, "0")}T10:00:00Z`,
      endsAt: `2027-01-${String(4 + i).padStart(2, "0")}T11:00:00Z`,
      status: "scheduled" as const,
    })),
    tickets: range(N).map((i) => ({
      ref: `t${i}`,
      subject: `Ticket ${i}`,
      status: "open" as const,
      createdBy: "ana",
      contact: `c${i}`,
      externalId: `${ref}-ticket-${i}`,
      createdAt: at(i < 2 ? 0 : i),
    })),
  });

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(fixture(data("acme", 10_000_000), data("globex", 20_000_000)));
}, 120_000);
afterAll(() => app?.close());

/** Every item of a list request (limit 200: the whole fixture). */
async function all(list: string, query = "", key?: string): Promise<Item[]> {
  const res = await get(`/${list}?limit=200${query ? `&${query}` : ""}`, key);
  expect(res.status, res.text).toBe(200);
  expect(res.body.total).toBe(res.body.items.length);
  return res.body.items;
}

/** Whether `items` are in the order `sort` names, ties by id in the same direction. */
function expectOrdered(items: Item[], sort: string) {
  const desc = sort.startsWith("-");
  const column = desc ? sort.slice(1) : sort;
  const key = (o: Item) => `${new Date(String(o[column])).toISOString()}|${o.id}`;
  const sorted = [...items].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  if (desc) sorted.reverse();
  expect(items.map((o) => o.id)).toEqual(sorted.map((o) => o.id));
}

/** The fields an envelope's details name, sorted. */
const fieldsOf = (body: { details: { fields?: { field: string }[] } }) =>
  (body.details.fields ?? []).map((f) => f.field).sort();

describe.each(LISTS)("GET /$list", (c) => {
  it("sort: each value orders the list, ties by id in the same direction; the default is the list's own", async () => {
    for (const s of c.sorts.flatMap((x) => [x, `-${x}`])) {
      const items = await all(c.list, `sort=${s}`);
      expect(items).toHaveLength(N);
      expectOrdered(items, s);
    }
    expect((await all(c.list)).map((o) => o.id)).toEqual((await all(c.list, `sort=${c.fallback}`)).map((o) => o.id));
    for (const bad of ["id", "-id", "updated_at", "+updatedAt", "--createdAt"]) {
      const res = await get(`/${c.list}?sort=${encodeURIComponent(bad)}`);
      expect(fieldsOf(expectEnvelope(res, 422, "VALIDATION_ERROR")), bad).toEqual(["sort"]);
    }
  });

  it("updatedFrom (inclusive) and updatedTo (exclusive) keep objects by updatedAt, with exact totals", async () => {
    // Three objects written now: their updatedAt is after every loaded one.
    const before = await all(c.list);
    const targets = before.slice(0, 3).map((o) => o.id);
    for (const [i, id] of targets.entries()) expect((await c.write(id, i)).status).toBeLessThan(300);
    const after = await all(c.list);
    const written = after.filter((o) => targets.includes(o.id));
    const pivot = written.map((o) => o.updatedAt).sort()[0]!;
    const from = await all(c.list, `updatedFrom=${pivot}`);
    expect(from.map((o) => o.id).sort()).toEqual(
      after
        .filter((o) => o.updatedAt >= pivot)
        .map((o) => o.id)
        .sort(),
    );
    expect(from.length).toBeGreaterThanOrEqual(1);
    const to = await all(c.list, `updatedTo=${pivot}`);
    expect(to.map((o) => o.id).sort()).toEqual(
      after
        .filter((o) => o.updatedAt < pivot)
        .map((o) => o.id)
        .sort(),
    );
    expect(from.length + to.length).toBe(N);
    // Equal bounds: an empty window; reversed: a 422 naming both.
    expect(await all(c.list, `updatedFrom=${pivot}&updatedTo=${pivot}`)).toEqual([]);
    const reversed = await get(`/${c.list}?updatedFrom=2026-12-02T00:00:00Z&updatedTo=2026-12-01T00:00:00Z`);
    expect(fieldsOf(expectEnvelope(reversed, 422, "VALIDATION_ERROR"))).toEqual(["updatedFrom", "updatedTo"]);
    expectEnvelope(await get(`/${c.list}?updatedFrom=yesterday`), 422, "VALIDATION_ERROR");
  });

  it("repeated id: those objects, exact total; unknown, other tenants' ones absent; over 100 or with externalId: 422", async () => {
    const own = (await all(c.list)).slice(0, 3).map((o) => o.id);
    const foreign = (await all(c.list, "", keyOf(globex)))[0]!.id;
    const q = [...own, foreign, randomUUID()].map((id) => `id=${id}`).join("&");
    const res = await get(`/${c.list}?${q}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.items.map((o: Item) => o.id).sort()).toEqual([...own].sort());
    expect(res.body.total).toBe(3);
    // One id, upper case: the same object.
    expect((await all(c.list, `id=${own[0]!.toUpperCase()}`)).map((o) => o.id)).toEqual([own[0]]);
    // With another filter: AND.
    const one = await all(c.list, `${q}&updatedTo=2000-01-01T00:00:00Z`);
    expect(one).toEqual([]);
    const many = range(101)
      .map(() => `id=${randomUUID()}`)
      .join("&");
    expect(fieldsOf(expectEnvelope(await get(`/${c.list}?${many}`), 422, "VALIDATION_ERROR"))).toEqual(["id"]);
    expectEnvelope(await get(`/${c.list}?id=not-a-uuid`), 422, "VALIDATION_ERROR");
    if (!c.external) return;
    const ext = (name: string) => `externalId=${encodeURIComponent(name)}`;
    const pair = await get(
      `/${c.list}?${ext(`acme-${c.list.slice(0, -1)}-1`)}&${ext(`acme-${c.list.slice(0, -1)}-2`)}`,
    );
    expect(pair.status, pair.text).toBe(200);
    expect(pair.body.total).toBe(2);
    const theirs = await get(`/${c.list}?${ext(`globex-${c.list.slice(0, -1)}-1`)}`);
    expect(theirs.body.items).toEqual([]);
    const both = await get(`/${c.list}?id=${own[0]}&${ext("x")}`);
    expect(fieldsOf(expectEnvelope(both, 422, "VALIDATION_ERROR"))).toEqual(["externalId", "id"]);
  });

  it("cursor: a walk by nextCursor is the list, in every order; a cursor elsewhere is a 422 naming it", async () => {
    for (const s of c.sorts.flatMap((x) => [x, `-${x}`])) {
      const whole = await all(c.list, `sort=${s}`);
      const walked: Item[] = [];
      let cursor: string | null = null;
      for (let page = 0; page <= N; page++) {
        const res = await get(`/${c.list}?sort=${s}&limit=2${cursor ? `&cursor=${cursor}` : ""}`);
        expect(res.status, res.text).toBe(200);
        expect(res.body.total).toBe(N);
        expect(res.body.pagination.page).toBe(walked.length / 2 + 1);
        walked.push(...res.body.items);
        cursor = res.body.nextCursor;
        if (!cursor) break;
      }
      expect(
        walked.map((o) => o.id),
        s,
      ).toEqual(whole.map((o) => o.id));
    }
    const first = await get(`/${c.list}?sort=createdAt&limit=2`);
    const cursor = first.body.nextCursor as string;
    expect(typeof cursor).toBe("string");
    // With offset: ignored.
    const again = await get(`/${c.list}?sort=createdAt&limit=2&offset=5&cursor=${cursor}`);
    expect(again.body.pagination.page).toBe(2);
    const refused = [
      get(`/${c.list}?sort=-createdAt&limit=2&cursor=${cursor}`),
      get(`/${c.list}?sort=createdAt&limit=2&updatedFrom=2000-01-01T00:00:00Z&cursor=${cursor}`),
      get(`/${c.list}?sort=createdAt&limit=2&cursor=${cursor}`, keyOf(globex)),
      get(`/${c.list}?sort=createdAt&cursor=${cursor.slice(0, -2)}`),
      get(`/${c.list}?cursor=%3D%3D`),
    ];
    for (const r of await Promise.all(refused))
      expect(fieldsOf(expectEnvelope(r, 422, "VALIDATION_ERROR")), r.text).toEqual(["cursor"]);
  });

  it("an ascending updatedAt walk sees every object present at its start, while they are written during it", async () => {
    const start = (await all(c.list)).map((o) => o.id);
    const seen = new Set<string>();
    let cursor: string | null = null;
    let n = 100;
    for (let page = 0; page < 5 * N; page++) {
      const res = await get(`/${c.list}?sort=updatedAt&limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(res.status, res.text).toBe(200);
      for (const o of res.body.items as Item[]) seen.add(o.id);
      // Between two pages, the first object not yet seen is written: it moves past the walk's position.
      const unseen = start.find((id) => !seen.has(id));
      if (unseen && page % 2 === 0) expect((await c.write(unseen, n++)).status).toBeLessThan(300);
      cursor = res.body.nextCursor;
      if (!cursor) break;
    }
    expect(start.filter((id) => !seen.has(id))).toEqual([]);
  });
});

describe("a request line naming 100 long external ids", () => {
  it("fits (100 × 255 four-byte characters, percent-encoded); a longer head is a 431 with the envelope", async () => {
    const long = (i: number) => `${String(i).padStart(3, "0")}${"😀".repeat(252)}`;
    const q = range(100)
      .map((i) => `externalId=${encodeURIComponent(long(i))}`)
      .join("&");
    const res = await get(`/leads?${q}`);
    expect(res.status, res.text.slice(0, 300)).toBe(200);
    expect(res.body.total).toBe(0);
    const over = await get(`/leads?externalId=${"x".repeat(MAX_HEADER_BYTES)}`);
    const body = expectEnvelope(over, 431, "REQUEST_HEADERS_TOO_LARGE");
    expect(body.details).toEqual({ limitBytes: MAX_HEADER_BYTES });
    // The service still answers afterwards.
    expect((await get("/leads?limit=1")).status).toBe(200);
  });
});

describe("GET /contacts: the search walk and the list declaration answer the same", () => {
  it("a request of the first form (the walk) and the same with sort=-createdAt (the declaration): same items, total, pages", async () => {
    const queries = ["", "search=contact", "search=3", "search=%2B346", "externalId=acme-contact-2", "search=zzz"];
    for (const q of queries)
      for (const page of ["limit=2", "limit=2&offset=2", "limit=3&offset=5", "limit=200"]) {
        const walk = await get(`/contacts?${page}${q ? `&${q}` : ""}`);
        const declared = await get(`/contacts?sort=-createdAt&${page}${q ? `&${q}` : ""}`);
        expect(walk.status, walk.text).toBe(200);
        expect(declared.status, declared.text).toBe(200);
        const same = (b: Record<string, unknown>) => ({ items: b.items, total: b.total, pagination: b.pagination });
        expect(same(declared.body), `${q} ${page}`).toEqual(same(walk.body));
        expect(declared.body.nextCursor === null, `${q} ${page}`).toBe(walk.body.nextCursor === null);
      }
  });
});
