// Contacts over HTTP: GET/POST /public/v1/contacts, PATCH /public/v1/contacts/{contact_id}.
// @topology citus
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { expectEnvelope, randomUuid, startApp, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const CONTACT_KEYS = [
  "country",
  "createdAt",
  "email",
  "emailVerifiedAt",
  "externalId",
  "fullName",
  "id",
  "marketingOptOut",
  "marketingOptOutAt",
  "origin",
  "phone",
  "phoneVerifiedAt",
  "updatedAt",
  "version",
].join(",");
const PAGINATION_KEYS = "hasNext,hasPrev,page,pageSize,totalItems,totalPages";

const BIG = { perMinute: 100_000, perDay: 1_000_000 };
const keys = (extra: { ref: string; scopes: string[] }[] = []) => [
  { ref: "full", owner: "ana", scopes: "all" as const },
  { ref: "bobkey", owner: "bob", scopes: "all" as const },
  { ref: "none", owner: "ana", scopes: [] },
  ...extra.map((k) => ({ ...k, owner: "ana" })),
];

let app: TestApp;
let ids: LoadResult;
let acme: LoadResult["tenants"][string];
let other: LoadResult["tenants"][string];
let finder: LoadResult["tenants"][string];
let pager: LoadResult["tenants"][string];
const key = (t: LoadResult["tenants"][string], ref = "full") => t.apiKeys[ref]!.key;

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: BIG,
        apiKeys: keys([
          { ref: "reader", scopes: ["tenant:contacts.read"] },
          { ref: "leadsonly", scopes: ["tenant:leads.manage", "tenant:leads.read"] },
        ]),
        contactLists: [{ ref: "vip" }],
        contacts: [
          {
            ref: "bea",
            fullName: "Bea Soto",
            phone: "+34600000001",
            email: "bea@example.test",
            country: "ES",
            lists: ["vip"],
            createdAt: "2026-11-01T09:00:00Z",
          },
          {
            ref: "gone",
            fullName: "Gone Person",
            phone: "+34600000002",
            email: "Gone@Example.test",
            deleted: true,
            createdAt: "2026-11-02T09:00:00Z",
          },
          {
            ref: "pat",
            fullName: "Pat Lee",
            phone: "+34600000010",
            email: "pat@example.test",
            createdAt: "2026-11-03T09:00:00Z",
          },
          {
            ref: "optout",
            fullName: "Opted Out",
            phone: "+34600000011",
            marketingOptOut: true,
            createdAt: "2026-11-04T09:00:00Z",
          },
        ],
      }),
      tenant("other", {
        rateLimit: BIG,
        defaultCountry: "US",
        contactLists: [{ ref: "ovip" }],
        contacts: [
          {
            ref: "oscar",
            fullName: "Oscar Other",
            phone: "+34600000009",
            email: "oscar@other.test",
            lists: ["ovip"],
            createdAt: "2026-11-01T09:00:00Z",
          },
          {
            ref: "bea2",
            fullName: "Bea Soto",
            phone: "+34600000001",
            email: "bea@example.test",
            createdAt: "2026-11-01T09:00:00Z",
          },
        ],
      }),
      tenant("finder", {
        rateLimit: BIG,
        contactLists: [{ ref: "vip" }, { ref: "empty" }],
        contacts: [
          {
            ref: "f1",
            fullName: "Bea Soto",
            phone: "+34600000001",
            email: "bea@example.test",
            lists: ["vip"],
            createdAt: "2026-11-01T09:00:00Z",
          },
          {
            ref: "f5",
            fullName: "Gone Person",
            phone: "+34600000002",
            email: "gone@example.test",
            deleted: true,
            lists: ["vip"],
            createdAt: "2026-11-02T09:00:00Z",
          },
          {
            ref: "f2",
            fullName: "50% Discount",
            phone: "+34600000003",
            email: "a_b@promo.test",
            createdAt: "2026-11-03T09:00:00Z",
          },
          {
            ref: "f3",
            fullName: "500 Discount",
            phone: "+34600000004",
            email: "axb@promo.test",
            createdAt: "2026-11-04T09:00:00Z",
          },
          {
            ref: "f4",
            fullName: "Back\\slash Co",
            phone: "+34600000005",
            email: "back@slash.test",
            lists: ["vip"],
            createdAt: "2026-11-05T09:00:00Z",
          },
          { ref: "f6", fullName: "Zed Nophone", phone: null, email: null, createdAt: "2026-11-06T09:00:00Z" },
        ],
      }),
      tenant("pager", {
        rateLimit: BIG,
        contacts: [
          { ref: "p0", phone: "+34611000000", createdAt: "2026-11-01T09:00:00Z" },
          { ref: "p1", phone: "+34611000001", createdAt: "2026-11-02T09:00:00Z" },
          { ref: "p2", phone: "+34611000002", createdAt: "2026-11-03T09:00:00Z" },
          { ref: "p3", phone: "+34611000003", createdAt: "2026-11-03T09:00:00Z" },
          { ref: "p4", phone: "+34611000004", createdAt: "2026-11-03T09:00:00Z" },
          { ref: "pdel", phone: "+34611000099", deleted: true, createdAt: "2026-11-03T09:00:00Z" },
          { ref: "p5", phone: "+34611000005", createdAt: "2026-11-04T09:00:00Z" },
          { ref: "p6", phone: "+34611000006", createdAt: "2026-11-05T09:00:00Z" },
        ],
      }),
    ),
  );
  acme = ids.tenants.acme!;
  other = ids.tenants.other!;
  finder = ids.tenants.finder!;
  pager = ids.tenants.pager!;
});
afterAll(() => app.close());

const count = (t: { id: string }) => app.db.prisma.contact.count({ where: { tenantId: t.id } });
const row = (id: string) => app.db.prisma.contact.findFirstOrThrow({ where: { id } });
const post = (body: unknown, k = key(acme), headers: Record<string, string> = {}) =>
  app.request("POST", "/public/v1/contacts", { key: k, body, headers });
const list = (query: Record<string, string | number | undefined> = {}, k = key(finder)) =>
  app.request("GET", "/public/v1/contacts", { key: k, query });
const patch = (id: string, body: unknown, k = key(acme)) =>
  app.request("PATCH", `/public/v1/contacts/${id}`, { key: k, body });

function expectContact(b: any) {
  expect(Object.keys(b).sort().join(",")).toBe(CONTACT_KEYS);
  expect(typeof b.id).toBe("string");
  expect(typeof b.marketingOptOut).toBe("boolean");
  expect(typeof b.origin).toBe("string");
  expect(new Date(b.createdAt).toISOString()).toBe(b.createdAt);
  return b;
}

function expectList(res: Response) {
  expect(res.status).toBe(200);
  expect(Object.keys(res.body).sort().join(",")).toBe("items,nextCursor,pagination,stableBefore,total");
  expect(Object.keys(res.body.pagination).sort().join(",")).toBe(PAGINATION_KEYS);
  res.body.items.forEach(expectContact);
  return res.body as { items: any[]; total: number; nextCursor: string | null; pagination: any };
}

/** 422 VALIDATION_ERROR naming `field` in details.fields. */
function expect422(res: Response, field: string) {
  const b = expectEnvelope(res, 422, "VALIDATION_ERROR");
  expect((b.details.fields as any[]).map((f) => f.field)).toContain(field);
}

// ------------------------------------------------------------------------------------------------

describe("POST /public/v1/contacts", () => {
  it("creates a contact: phone normalized with the given country, country upper-cased, origin api, 201", async () => {
    const now = new Date("2026-11-22T10:00:00.000Z");
    app.setNow(now);
    const before = await count(acme);
    const r = await post({ fullName: "Nora Diaz", phone: "612 345 678", country: "es", email: "Nora@Example.test" });
    app.setNow(undefined);
    expect(r.status).toBe(201);
    expectContact(r.body);
    expect(r.body).toMatchObject({
      fullName: "Nora Diaz",
      phone: "+34612345678",
      email: "Nora@Example.test",
      country: "ES",
      phoneVerifiedAt: null,
      emailVerifiedAt: null,
      marketingOptOut: false,
      marketingOptOutAt: null,
      origin: "api",
      createdAt: now.toISOString(),
    });
    expect(await count(acme)).toBe(before + 1);
    const stored = await row(r.body.id);
    expect(stored).toMatchObject({ tenantId: acme.id, phone: "+34612345678", origin: "api", deletedAt: null });
  });

  it("uses the tenant's default country when country is omitted", async () => {
    const r = await post({ phone: "612 345 679" });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ phone: "+34612345679", country: null, fullName: null, email: null, origin: "api" });
    const us = await post({ phone: "(201) 555-0123" }, key(other));
    expect(us.status).toBe(201);
    expect(us.body.phone).toBe("+12015550123");
  });

  it("keeps an international number whatever the country, and accepts the bounds (phone 40, fullName 255, email 320)", async () => {
    const intl = await post({ phone: "+44 20 7946 0958", country: "ES" });
    expect(intl.status).toBe(201);
    expect(intl.body).toMatchObject({ phone: "+442079460958", country: "ES" });
    const email = `${"x".repeat(320 - "@bounds.test".length)}@bounds.test`;
    const r = await post({ phone: "+34 612 345 681".padEnd(40, " "), fullName: "n".repeat(255), email });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ phone: "+34612345681", fullName: "n".repeat(255), email });
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ["missing phone", { fullName: "No Phone" }, "phone"],
    ["empty phone", { phone: "" }, "phone"],
    ["blank phone", { phone: "   " }, "phone"],
    ["phone over 40 characters", { phone: "+34 612 345 690".padEnd(41, " ") }, "phone"],
    ["unparseable phone", { phone: "not a phone" }, "phone"],
    ["impossible phone", { phone: "12" }, "phone"],
    ["phone too long for the region", { phone: "6123456789012", country: "ES" }, "phone"],
    ["numeric phone", { phone: 612345691 }, "phone"],
    ["null phone", { phone: null }, "phone"],
    ["country ESP", { phone: "612345692", country: "ESP" }, "country"],
    ["country of 1 letter", { phone: "612345692", country: "E" }, "country"],
    ["country with a digit", { phone: "612345692", country: "E1" }, "country"],
    ["empty country", { phone: "612345692", country: "" }, "country"],
    ["unknown country code", { phone: "+34612345692", country: "XX" }, "country"],
    ["email not an email", { phone: "612345692", email: "not-an-email" }, "email"],
    [
      "email over 320",
      { phone: "612345692", email: `${"x".repeat(321 - "@bounds.test".length)}@bounds.test` },
      "email",
    ],
    ["fullName over 255", { phone: "612345692", fullName: "n".repeat(256) }, "fullName"],
    ["fullName not a string", { phone: "612345692", fullName: 5 }, "fullName"],
    ["origin in the body", { phone: "612345692", origin: "api" }, "origin"],
    ["unknown field", { phone: "612345692", nickname: "x" }, "nickname"],
    ["id in the body", { phone: "612345692", id: randomUuid() }, "id"],
    ["marketingOptOut on create", { phone: "612345692", marketingOptOut: true }, "marketingOptOut"],
  ];
  it.each(invalid)("422 VALIDATION_ERROR: %s, nothing persisted", async (_name, body, field) => {
    const before = await count(acme);
    expect422(await post(body), field);
    expect(await count(acme)).toBe(before);
  });

  it("422 on malformed JSON, a non-object body and a wrong Content-Type, nothing persisted", async () => {
    const before = await count(acme);
    const k = key(acme);
    expectEnvelope(
      await app.request("POST", "/public/v1/contacts", {
        key: k,
        raw: '{"phone": "612345693"',
        headers: { "Content-Type": "application/json" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(
      await app.request("POST", "/public/v1/contacts", {
        key: k,
        raw: "[]",
        headers: { "Content-Type": "application/json" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(
      await app.request("POST", "/public/v1/contacts", {
        key: k,
        raw: '{"phone":"612345693"}',
        headers: { "Content-Type": "text/plain" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(
      await app.request("POST", "/public/v1/contacts", { key: k, raw: '{"phone":"612345693"}' }),
      422,
      "VALIDATION_ERROR",
    );
    expect(await count(acme)).toBe(before);
  });

  describe("duplicates → 409 ALREADY_EXISTS, nothing persisted", () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["phone of a live contact (other format)", { phone: "600 000 001" }, "phone"],
      ["phone of a live contact (E.164)", { phone: "+34600000001", fullName: "Someone" }, "phone"],
      ["phone of a soft-deleted contact", { phone: "+34 600 000 002" }, "phone"],
      ["email of a live contact, other case", { phone: "612345700", email: "BEA@EXAMPLE.TEST" }, "email"],
      ["email of a soft-deleted contact, other case", { phone: "612345701", email: "gone@example.TEST" }, "email"],
    ];
    it.each(cases)("%s", async (_name, body, field) => {
      const before = await count(acme);
      const b = expectEnvelope(await post(body), 409, "ALREADY_EXISTS");
      expect(b.details.field).toBe(field);
      expect(await count(acme)).toBe(before);
    });

    it("another tenant's phone and email are not duplicates", async () => {
      const r = await post({ phone: "+34600000009", email: "OSCAR@other.test" });
      expect(r.status).toBe(201);
      expect(r.body.phone).toBe("+34600000009");
    });

    it("20 concurrent creates with one phone: exactly one 201 and nineteen 409", async () => {
      const before = await count(acme);
      const res = await Promise.all(
        Array.from({ length: 20 }, (_, i) => post({ phone: "612 999 000", fullName: `Racer ${i}` })),
      );
      const statuses = res.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(19);
      for (const r of res.filter((r) => r.status === 409)) expectEnvelope(r, 409, "ALREADY_EXISTS");
      expect(await count(acme)).toBe(before + 1);
      expect(await app.db.prisma.contact.count({ where: { tenantId: acme.id, phone: "+34612999000" } })).toBe(1);
    });

    it("10 concurrent creates with one email in different cases: exactly one 201", async () => {
      const before = await count(acme);
      const res = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          post({ phone: `61299910${i}`, email: i % 2 ? "race@EXAMPLE.test" : "Race@example.test" }),
        ),
      );
      expect(res.filter((r) => r.status === 201)).toHaveLength(1);
      expect(res.filter((r) => r.status === 409 && r.body.error === "ALREADY_EXISTS")).toHaveLength(9);
      expect(await count(acme)).toBe(before + 1);
    });
  });

  describe("Idempotency-Key", () => {
    it("a repeat with the same key and body replays the original response, one row", async () => {
      const before = await count(acme);
      const h = { "Idempotency-Key": "contact-replay-1" };
      const body = { phone: "612 345 800", fullName: "Ida Replay", email: "ida@example.test" };
      const first = await post(body, key(acme), h);
      expect(first.status).toBe(201);
      const again = await post(
        { email: "ida@example.test", fullName: "Ida Replay", phone: "612 345 800" },
        key(acme),
        h,
      );
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await count(acme)).toBe(before + 1);
    });

    it("the same key with a different body → 422 IDEMPOTENCY_KEY_REUSE_MISMATCH, nothing persisted", async () => {
      const h = { "Idempotency-Key": "contact-mismatch-1" };
      expect((await post({ phone: "612 345 801" }, key(acme), h)).status).toBe(201);
      const before = await count(acme);
      expectEnvelope(await post({ phone: "612 345 802" }, key(acme), h), 422, "IDEMPOTENCY_KEY_REUSE_MISMATCH");
      expect(await count(acme)).toBe(before);
      expect(await app.db.prisma.contact.count({ where: { tenantId: acme.id, phone: "+34612345802" } })).toBe(0);
    });

    it("10 concurrent duplicates with one key: one row, every response the same body", async () => {
      const before = await count(acme);
      const h = { "Idempotency-Key": "contact-concurrent-1" };
      const res = await Promise.all(
        Array.from({ length: 10 }, () => post({ phone: "612 345 803", fullName: "Con Current" }, key(acme), h)),
      );
      for (const r of res) expect(r.status).toBe(201);
      for (const r of res) expect(r.body).toEqual(res[0]!.body);
      expect(await count(acme)).toBe(before + 1);
    });

    it("a failed create is not remembered: the key can be used again", async () => {
      const h = { "Idempotency-Key": "contact-failed-1" };
      expectEnvelope(await post({ phone: "+34600000001" }, key(acme), h), 409, "ALREADY_EXISTS");
      expect422(await post({ phone: "nope" }, key(acme), h), "phone");
      const ok = await post({ phone: "612 345 804" }, key(acme), h);
      expect(ok.status).toBe(201);
      expect(ok.body.phone).toBe("+34612345804");
    });
  });

  describe("auth", () => {
    it("403 PERMISSION_DENIED without tenant:contacts.manage (no scopes, read only, another resource's manage)", async () => {
      const before = await count(acme);
      for (const ref of ["none", "reader", "leadsonly"]) {
        const b = expectEnvelope(await post({ phone: "612 345 900" }, key(acme, ref)), 403, "PERMISSION_DENIED");
        expect(b.error).toBe("PERMISSION_DENIED");
      }
      // scope is checked before the body is read
      expectEnvelope(
        await app.request("POST", "/public/v1/contacts", {
          key: key(acme, "none"),
          raw: "{",
          headers: { "Content-Type": "application/json" },
        }),
        403,
        "PERMISSION_DENIED",
      );
      expect(await count(acme)).toBe(before);
    });

    it("401 without a key", async () => {
      const before = await count(acme);
      expectEnvelope(await post({ phone: "612 345 901" }, ""), 401, "INVALID_CREDENTIALS");
      expect(await count(acme)).toBe(before);
    });
  });
});

// ------------------------------------------------------------------------------------------------

describe("GET /public/v1/contacts", () => {
  const names = (b: { items: any[] }) => b.items.map((c) => c.fullName);

  it("lists the tenant's live contacts newest first, with the full envelope", async () => {
    const b = expectList(await list());
    expect(names(b)).toEqual(["Zed Nophone", "Back\\slash Co", "500 Discount", "50% Discount", "Bea Soto"]);
    expect(b.total).toBe(5);
    expect(b.nextCursor).toBeNull();
    expect(b.pagination).toEqual({
      page: 1,
      pageSize: 50,
      totalItems: 5,
      totalPages: 1,
      hasNext: false,
      hasPrev: false,
    });
    expect(b.items[4]).toEqual({
      id: finder.contacts.f1,
      fullName: "Bea Soto",
      phone: "+34600000001",
      email: "bea@example.test",
      country: null,
      phoneVerifiedAt: null,
      emailVerifiedAt: null,
      marketingOptOut: false,
      marketingOptOutAt: null,
      origin: "import",
      createdAt: "2026-11-01T09:00:00.000Z",
      updatedAt: "2026-11-01T09:00:00.000Z",
      externalId: null,
      version: 1,
    });
    expect(b.items.map((c) => c.id)).not.toContain(finder.contacts.f5);
  });

  const searches: [string, string, string[]][] = [
    ["name, other case", "bEA sO", ["Bea Soto"]],
    ["email fragment, other case", "EXAMPLE.TEST", ["Bea Soto"]],
    ["phone fragment", "600000004", ["500 Discount"]],
    ["phone prefix", "+346000000", ["Back\\slash Co", "500 Discount", "50% Discount", "Bea Soto"]],
    ["phone fragment with spaces", "600 000 004", ["500 Discount"]],
    ["% matches literally", "0%", ["50% Discount"]],
    ["% alone", "%", ["50% Discount"]],
    ["_ matches literally", "a_b", ["50% Discount"]],
    ["_ alone", "_", ["50% Discount"]],
    ["backslash matches literally", "k\\s", ["Back\\slash Co"]],
    ["several matches", "discount", ["500 Discount", "50% Discount"]],
    ["a deleted contact is not found", "gone", []],
    ["no match", "nobody-here", []],
  ];
  it.each(searches)("search: %s", async (_name, search, expected) => {
    const b = expectList(await list({ search }));
    expect(names(b)).toEqual(expected);
    expect(b.total).toBe(expected.length);
  });

  it("search bounds: 201 characters → 422, 200 characters → 200; an empty search= is no filter", async () => {
    expect(expectList(await list({ search: "" })).total).toBe(5);
    expect422(await list({ search: "s".repeat(201) }), "search");
    const b = expectList(await list({ search: "s".repeat(200) }));
    expect(b.items).toEqual([]);
  });

  it("listId: members of the list only, deleted members excluded; combinable with search", async () => {
    const b = expectList(await list({ listId: finder.contactLists.vip }));
    expect(b.items.map((c) => c.id)).toEqual([finder.contacts.f4, finder.contacts.f1]);
    expect(b.total).toBe(2);
    const s = expectList(await list({ listId: finder.contactLists.vip, search: "bea" }));
    expect(s.items.map((c) => c.id)).toEqual([finder.contacts.f1]);
  });

  it("listId: an empty, unknown or foreign list → 200 empty; a malformed id → 422", async () => {
    for (const listId of [finder.contactLists.empty!, randomUuid(), other.contactLists.ovip!, acme.contactLists.vip!]) {
      const b = expectList(await list({ listId }));
      expect(b.items).toEqual([]);
      expect(b.total).toBe(0);
      expect(b.nextCursor).toBeNull();
      expect(b.pagination).toMatchObject({ totalItems: 0, totalPages: 0, hasNext: false, hasPrev: false });
    }
    expect422(await list({ listId: "not-a-uuid" }), "listId");
  });

  it("tenant isolation: another tenant's key sees only its own contacts", async () => {
    const b = expectList(await list({ limit: 200 }, key(other)));
    const theirs = b.items.map((c) => c.id);
    expect(theirs).toContain(other.contacts.oscar);
    for (const id of Object.values(finder.contacts)) expect(theirs).not.toContain(id);
    for (const id of Object.values(acme.contacts)) expect(theirs).not.toContain(id);
  });

  it("ignores unknown query parameters", async () => {
    expect(expectList(await list({ foo: "bar" })).total).toBe(5);
  });

  it("403 PERMISSION_DENIED without tenant:contacts.read (a manage-only key is not enough)", async () => {
    expectEnvelope(await list({}, key(acme, "none")), 403, "PERMISSION_DENIED");
    expectEnvelope(await list({}, key(acme, "leadsonly")), 403, "PERMISSION_DENIED");
    expect(expectList(await list({}, key(acme, "reader"))).total).toBeGreaterThan(0);
  });

  describe("pagination", () => {
    let order: string[];
    const plist = (query: Record<string, string | number | undefined>) => list(query, key(pager));

    beforeAll(async () => {
      const tie = [pager.contacts.p2!, pager.contacts.p3!, pager.contacts.p4!].sort().reverse();
      order = [pager.contacts.p6!, pager.contacts.p5!, ...tie, pager.contacts.p1!, pager.contacts.p0!];
    });

    it("default page, limit 200 and limit 1", async () => {
      const all = expectList(await plist({ limit: 200 }));
      expect(all.items.map((c) => c.id)).toEqual(order); // createdAt desc, then id desc; deleted excluded
      expect(all.pagination).toEqual({
        page: 1,
        pageSize: 200,
        totalItems: 7,
        totalPages: 1,
        hasNext: false,
        hasPrev: false,
      });
      expect(all.nextCursor).toBeNull();

      const one = expectList(await plist({ limit: 1 }));
      expect(one.items.map((c) => c.id)).toEqual([order[0]]);
      expect(one.total).toBe(7);
      expect(one.pagination).toEqual({
        page: 1,
        pageSize: 1,
        totalItems: 7,
        totalPages: 7,
        hasNext: true,
        hasPrev: false,
      });
      expect(typeof one.nextCursor).toBe("string");
    });

    it("limit and offset bounds → 422", async () => {
      for (const limit of ["0", "201", "-1", "1.5", "abc", "1e2"]) expect422(await plist({ limit }), "limit");
      for (const offset of ["-1", "x", "2.5"]) expect422(await plist({ offset }), "offset");
      // an empty query value is no value: defaults apply
      const empty = expectList(await plist({ limit: "", offset: "", cursor: "" }));
      expect(empty.pagination).toMatchObject({ page: 1, pageSize: 50, hasPrev: false });
    });

    it("offset pages: middle, last partial, exactly at the end, past the end", async () => {
      const mid = expectList(await plist({ offset: 2, limit: 2 }));
      expect(mid.items.map((c) => c.id)).toEqual(order.slice(2, 4));
      expect(mid.pagination).toEqual({
        page: 2,
        pageSize: 2,
        totalItems: 7,
        totalPages: 4,
        hasNext: true,
        hasPrev: true,
      });
      expect(mid.nextCursor).not.toBeNull();

      const last = expectList(await plist({ offset: 6, limit: 2 }));
      expect(last.items.map((c) => c.id)).toEqual(order.slice(6));
      expect(last.pagination).toMatchObject({ hasNext: false, hasPrev: true });
      expect(last.nextCursor).toBeNull();

      for (const offset of [7, 100]) {
        const past = expectList(await plist({ offset, limit: 2 }));
        expect(past.items).toEqual([]);
        expect(past.total).toBe(7);
        expect(past.pagination).toMatchObject({ totalItems: 7, hasNext: false, hasPrev: true });
        expect(past.nextCursor).toBeNull();
      }
    });

    it("nextCursor round trip: every contact exactly once, in order, then null", async () => {
      for (const limit of [1, 2, 3, 7]) {
        const seen: string[] = [];
        let cursor: string | undefined;
        let pages = 0;
        for (;;) {
          const b = expectList(await plist({ limit, cursor }));
          pages++;
          expect(b.total).toBe(7);
          expect(b.pagination.page).toBe(pages);
          expect(b.pagination.hasPrev).toBe(pages > 1);
          seen.push(...b.items.map((c) => c.id));
          expect(b.pagination.hasNext).toBe(b.nextCursor !== null);
          if (!b.nextCursor) break;
          cursor = b.nextCursor;
          expect(pages).toBeLessThan(20);
        }
        expect(seen).toEqual(order);
        expect(pages).toBe(Math.ceil(7 / limit));
      }
    });

    it("with a cursor, offset is ignored", async () => {
      const first = expectList(await plist({ limit: 2 }));
      const a = expectList(await plist({ limit: 2, cursor: first.nextCursor! }));
      const b = expectList(await plist({ limit: 2, cursor: first.nextCursor!, offset: 5 }));
      expect(b.items.map((c) => c.id)).toEqual(a.items.map((c) => c.id));
      expect(a.items.map((c) => c.id)).toEqual(order.slice(2, 4));
    });

    it("a malformed cursor → 422", async () => {
      const b64 = (s: string) => Buffer.from(s).toString("base64url");
      for (const cursor of [
        "!!!",
        "abc",
        b64("2026-11-01T00:00:00.000Z|not-a-uuid"),
        b64(`yesterday|${randomUuid()}`),
        b64(`2026-13-01T00:00:00.000Z|${randomUuid()}`),
      ]) {
        expect422(await plist({ cursor }), "cursor");
      }
    });

    it("a cursor keeps its position when newer contacts arrive (no duplicates, no gaps)", async () => {
      const first = expectList(await plist({ limit: 3 }));
      expect(first.items.map((c) => c.id)).toEqual(order.slice(0, 3));
      const created = await post({ phone: "+34611000100" }, key(pager));
      expect(created.status).toBe(201);
      const next = expectList(await plist({ limit: 3, cursor: first.nextCursor! }));
      expect(next.items.map((c) => c.id)).toEqual(order.slice(3, 6));
      expect(next.total).toBe(8);
      const newest = expectList(await plist({ limit: 1 }));
      expect(newest.items[0].id).toBe(created.body.id);
    });
  });
});

// ------------------------------------------------------------------------------------------------

describe("PATCH /public/v1/contacts/{contact_id}", () => {
  const snapshot = async (id: string) => {
    const r = await row(id);
    return { ...r };
  };

  it("{} changes nothing and returns the contact", async () => {
    const id = acme.contacts.pat!;
    const before = await snapshot(id);
    const r = await patch(id, {});
    expect(r.status).toBe(200);
    expectContact(r.body);
    expect(r.body).toMatchObject({
      id,
      fullName: "Pat Lee",
      phone: "+34600000010",
      email: "pat@example.test",
      origin: "import",
      createdAt: "2026-11-03T09:00:00.000Z",
    });
    expect(await snapshot(id)).toEqual(before);
  });

  it("fullName and email change; other fields stay; updatedAt advances", async () => {
    const id = acme.contacts.pat!;
    const before = await snapshot(id);
    const now = new Date("2026-11-25T12:00:00.000Z");
    app.setNow(now);
    const r = await patch(id, { fullName: "Patricia Lee", email: "Patricia@Example.test" });
    app.setNow(undefined);
    expect(r.status).toBe(200);
    expectContact(r.body);
    expect(r.body).toMatchObject({
      id,
      fullName: "Patricia Lee",
      email: "Patricia@Example.test",
      phone: "+34600000010",
      marketingOptOut: false,
      createdAt: "2026-11-03T09:00:00.000Z",
    });
    const after = await snapshot(id);
    // The database's clock (the "row_touch" trigger), not the service's; the answer shows it.
    expect(after.updatedAt.getTime()).not.toBe(now.getTime());
    expect(r.body.updatedAt).toBe(after.updatedAt.toISOString());
    expect(after.updatedAt.getTime()).toBeGreaterThan(before.updatedAt.getTime());
    expect(after.createdAt).toEqual(before.createdAt);
  });

  it("its own email in another case is not a clash; null clears fullName and email", async () => {
    const id = acme.contacts.pat!;
    expect((await patch(id, { email: "patricia@example.TEST" })).body.email).toBe("patricia@example.TEST");
    const r = await patch(id, { fullName: null, email: null });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ fullName: null, email: null });
    const back = await patch(id, { fullName: "Pat Lee", email: "pat@example.test" });
    expect(back.body).toMatchObject({ fullName: "Pat Lee", email: "pat@example.test" });
  });

  it("marketingOptOut: true stamps marketingOptOutAt once, false clears it", async () => {
    const id = acme.contacts.pat!;
    const t1 = new Date("2026-11-26T08:00:00.000Z");
    app.setNow(t1);
    const on = await patch(id, { marketingOptOut: true });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ marketingOptOut: true, marketingOptOutAt: t1.toISOString() });
    app.setNow(new Date("2026-11-27T08:00:00.000Z"));
    const again = await patch(id, { marketingOptOut: true });
    expect(again.body).toMatchObject({ marketingOptOut: true, marketingOptOutAt: t1.toISOString() });
    const off = await patch(id, { marketingOptOut: false });
    app.setNow(undefined);
    expect(off.body).toMatchObject({ marketingOptOut: false, marketingOptOutAt: null });
    expect(await row(id)).toMatchObject({ marketingOptOut: false, marketingOptOutAt: null });
  });

  it("marketingOptOut false on a fixture contact that opted out clears the timestamp", async () => {
    const id = acme.contacts.optout!;
    expect((await row(id)).marketingOptOutAt).not.toBeNull();
    const r = await patch(id, { marketingOptOut: false });
    expect(r.body).toMatchObject({ marketingOptOut: false, marketingOptOutAt: null });
  });

  it("email used by another contact (live or soft-deleted, any case) → 409 ALREADY_EXISTS, nothing changed", async () => {
    const id = acme.contacts.pat!;
    for (const email of ["BEA@example.test", "gone@EXAMPLE.test"]) {
      const before = await snapshot(id);
      const b = expectEnvelope(
        await patch(id, { email, fullName: "Should Not Stick", marketingOptOut: true }),
        409,
        "ALREADY_EXISTS",
      );
      expect(b.details.field).toBe("email");
      expect(await snapshot(id)).toEqual(before);
    }
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ["phone is not patchable", { phone: "+34600000077" }, "phone"],
    ["country is not patchable", { country: "FR" }, "country"],
    ["origin is not patchable", { origin: "api" }, "origin"],
    ["unknown field", { nickname: "x" }, "nickname"],
    ["marketingOptOut not a boolean", { marketingOptOut: "yes" }, "marketingOptOut"],
    ["marketingOptOut null", { marketingOptOut: null }, "marketingOptOut"],
    ["marketingOptOut as a string", { marketingOptOut: "true" }, "marketingOptOut"],
    ["marketingOptOut as a number", { marketingOptOut: 1 }, "marketingOptOut"],
    ["email not an email", { email: "nope" }, "email"],
    ["email over 320", { email: `${"x".repeat(321 - "@bounds.test".length)}@bounds.test` }, "email"],
    ["fullName over 255", { fullName: "n".repeat(256) }, "fullName"],
    ["fullName not a string", { fullName: 1 }, "fullName"],
  ];
  it.each(invalid)("422 VALIDATION_ERROR: %s, nothing changed", async (_name, body, field) => {
    const id = acme.contacts.pat!;
    const before = await snapshot(id);
    expect422(await patch(id, { fullName: "Changed", ...body }), field);
    expect(await snapshot(id)).toEqual(before);
  });

  it("422 on malformed JSON and wrong Content-Type, nothing changed", async () => {
    const id = acme.contacts.pat!;
    const before = await snapshot(id);
    const path = `/public/v1/contacts/${id}`;
    expectEnvelope(
      await app.request("PATCH", path, {
        key: key(acme),
        raw: '{"fullName":',
        headers: { "Content-Type": "application/json" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(
      await app.request("PATCH", path, {
        key: key(acme),
        raw: '{"fullName":"X"}',
        headers: { "Content-Type": "text/plain" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expect(await snapshot(id)).toEqual(before);
  });

  it("404 NOT_FOUND for an unknown, soft-deleted or foreign contact; nothing changed", async () => {
    const gone = await snapshot(acme.contacts.gone!);
    const oscar = await snapshot(other.contacts.oscar!);
    for (const id of [randomUuid(), acme.contacts.gone!, other.contacts.oscar!]) {
      expectEnvelope(await patch(id, { fullName: "Hijack" }), 404, "NOT_FOUND");
      expectEnvelope(await patch(id, {}), 404, "NOT_FOUND");
    }
    expect(await snapshot(acme.contacts.gone!)).toEqual(gone);
    expect(await snapshot(other.contacts.oscar!)).toEqual(oscar);
  });

  it("422 before 404: a malformed id, or an invalid body on an unknown contact", async () => {
    expect422(await patch("not-a-uuid", { fullName: "X" }), "contact_id");
    expect422(await patch(randomUuid(), { phone: "+34600000078" }), "phone");
  });

  it("403 PERMISSION_DENIED without tenant:contacts.manage, nothing changed", async () => {
    const id = acme.contacts.pat!;
    const before = await snapshot(id);
    for (const ref of ["none", "reader", "leadsonly"])
      expectEnvelope(await patch(id, { fullName: "Nope" }, key(acme, ref)), 403, "PERMISSION_DENIED");
    expect(await snapshot(id)).toEqual(before);
  });
});
