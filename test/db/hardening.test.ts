// Hardening: no 500 on any input, and the guard's holes. Every finding is
// asserted through HTTP: status, error code, envelope, and that nothing was persisted.
//   dates the database cannot store · over-long phone numbers · deeply nested bodies · the SQLSTATE
//   backstop (22xxx, 23514 → 422; 40P01, 40001 → 503) and its log · the capped validation details ·
//   ids normalised once (upper-case ids, the calendar lock) · the openapi.json exemption · JSON
//   media types · case variants of the guarded prefixes · the DATABASE_URL-without-REDIS_URL warning.
// @topology pooler
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServices } from "../../server/bootstrap.js";
import { loadConfig } from "../../server/config.js";
import type { TenantIds } from "../../server/admin/fixture.js";
import type { Logger } from "../../server/logger.js";
import { expectEnvelope, holdCalendarLock, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { waitForLockWaiters } from "../helpers/locks.js";

const TOKEN = "hardening-token";
const onPostgres = Boolean(process.env.DATABASE_URL);

let app: TestApp & { testDb: Awaited<ReturnType<typeof startApp>>["testDb"] };
let acme: TenantIds;
let pago: TenantIds;
let auck: TenantIds;
let KEY: string;

beforeAll(async () => {
  app = await startApp({ config: { internalToken: TOKEN } });
  const ids = await app.load(
    fixture(
      tenant("acme", {
        apiKeys: [
          { ref: "full", owner: "ana", scopes: "all" },
          { ref: "none", owner: "ana", scopes: [] },
        ],
        contacts: [{ ref: "bea", fullName: "Bea", phone: "+34600000001" }],
        leads: [{ ref: "l1", customerName: "Lead one", contact: "bea" }],
        conversations: [
          {
            ref: "web",
            channel: "site",
            identity: { externalId: "visitor-1" },
            messages: [{ role: "user", content: "hi" }],
          },
        ],
        tickets: [{ ref: "t1", subject: "Help", createdBy: "ana", contact: "bea" }],
      }),
      // West of UTC: midnight after 9999-12-31 is in year 10000 (UTC).
      tenant("pago", { timezone: "Pacific/Pago_Pago" }),
      // East of UTC (LMT +11:39 in year 1): midnight of 0001-01-01 is in year 0 (UTC).
      tenant("auck", { timezone: "Pacific/Auckland" }),
    ),
  );
  acme = ids.tenants.acme!;
  pago = ids.tenants.pago!;
  auck = ids.tenants.auck!;
  KEY = acme.apiKeys.full!.key;
});
afterAll(() => app.close());

const json = (res: globalThis.Response): Promise<any> => res.json();
const fieldsOf = (body: any): string[] => (body.details.fields as { field: string }[]).map((f) => f.field);
const counts = async () => ({
  leads: await app.db.prisma.lead.count(),
  contacts: await app.db.prisma.contact.count(),
  appointments: await app.db.prisma.appointment.count(),
  conversations: await app.db.prisma.conversation.count(),
  customers: await app.db.prisma.customer.count(),
  messages: await app.db.prisma.message.count(),
  idempotency: await app.db.prisma.idempotencyRecord.count(),
});

/** A logger whose lines land in `lines` (parsed), swapped into the running app for one test. */
async function withCapturedLogs<T>(run: (lines: any[]) => Promise<T>): Promise<T> {
  const lines: any[] = [];
  const original = app.services.logger;
  app.services.logger = pino(
    { level: "debug" },
    { write: (s: string) => lines.push(JSON.parse(s)) },
  ) as unknown as Logger;
  try {
    return await run(lines);
  } finally {
    app.services.logger = original;
  }
}

describe("dates the database cannot store → 422 naming the field", () => {
  it("GET /leads: dateFrom/dateTo outside 0001–9999 after UTC conversion", async () => {
    for (const [field, value] of [
      ["dateFrom", "0000-01-01T00:00:00Z"],
      ["dateFrom", "0001-01-01T00:00:00+14:00"], // 0000-12-31T10:00Z
      ["dateTo", "9999-12-31T23:00:00-14:00"], // 10000-01-01T13:00Z
      ["dateTo", "0000-06-01T00:00:00.000Z"],
    ] as const) {
      const r = await app.request("GET", "/public/v1/leads", { key: KEY, query: { [field]: value } });
      const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
      expect(b.details.fields).toEqual([expect.objectContaining({ field, code: "out_of_range" })]);
    }
    // The bounds themselves are fine.
    const ok = await app.request("GET", "/public/v1/leads", {
      key: KEY,
      query: { dateFrom: "0001-01-01T00:00:00Z", dateTo: "9999-12-31T23:59:59.999Z" },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.total).toBe(1);
    expect(
      (await app.request("GET", "/public/v1/leads", { key: KEY, query: { dateFrom: "0001-01-01T00:00:00-14:00" } }))
        .status,
    ).toBe(200);
  });

  it("GET /appointments: from/to outside the range", async () => {
    const r = await app.request("GET", "/public/v1/appointments", {
      key: KEY,
      query: { from: "0000-01-01T00:00:00Z", to: "9999-12-31T12:00:00-12:00" },
    });
    expect(fieldsOf(expectEnvelope(r, 422, "VALIDATION_ERROR")).sort()).toEqual(["from", "to"]);
    expect(
      (
        await app.request("GET", "/public/v1/appointments", {
          key: KEY,
          query: { from: "0001-01-01T00:00:00Z", to: "9999-12-31T23:59:59Z" },
        })
      ).status,
    ).toBe(200);
  });

  it("GET /availability: year 0000 is 422; derived local midnights are clamped at both ends", async () => {
    const r = await app.request("GET", "/public/v1/availability", {
      key: KEY,
      query: { from: "0000-01-01", to: "0000-01-01" },
    });
    expect(fieldsOf(expectEnvelope(r, 422, "VALIDATION_ERROR")).sort()).toEqual(["from", "to"]);
    // Auckland: local midnight of 0001-01-01 is 0000-12-31T12:20:56Z (was a 500). All in the past: no slots.
    const first = await app.request("GET", "/public/v1/availability", {
      key: auck.apiKeys.full!.key,
      query: { from: "0001-01-01", to: "0001-01-02" },
    });
    expect(first.status).toBe(200);
    expect(first.body.slots).toEqual([]);
    // Pago Pago (UTC−11): 9999-12-31 (a Friday) 09:00–17:00 local is 20:00Z … 04:00Z in year 10000.
    // Only the slots that end by 9999-12-31T23:59:59.999Z exist.
    const last = await app.request("GET", "/public/v1/availability", {
      key: pago.apiKeys.full!.key,
      query: { from: "9999-12-31", to: "9999-12-31" },
    });
    expect(last.status).toBe(200);
    expect(last.body.slots.map((s: { startsAt: string }) => s.startsAt.slice(11, 16))).toEqual([
      "20:00",
      "20:30",
      "21:00",
      "21:30",
      "22:00",
      "22:30",
      "23:00",
    ]);
    expect(last.body.slots.at(-1).endsAt).toBe("9999-12-31T23:30:00.000Z");
  });

  it("POST /appointments: startsAt/endsAt outside the range, nothing persisted", async () => {
    const before = await counts();
    const base = { assignedUserId: acme.users.ana, title: "Visit", appointmentType: "visit" };
    for (const [body, fields] of [
      [{ startsAt: "0000-01-01T00:00:00Z", endsAt: "0000-01-01T01:00:00Z" }, ["endsAt", "startsAt"]],
      [{ startsAt: "0001-01-01T00:00:00+14:00", endsAt: "0001-01-01T01:00:00Z" }, ["startsAt"]],
      [{ startsAt: "9999-12-31T20:00:00Z", endsAt: "9999-12-31T20:00:00-04:00" }, ["endsAt"]],
    ] as const) {
      const r = await app.request("POST", "/public/v1/appointments", {
        key: KEY,
        body: { ...base, ...body },
        headers: { "Idempotency-Key": `dates-${fields.join()}` },
      });
      expect(fieldsOf(expectEnvelope(r, 422, "VALIDATION_ERROR")).sort()).toEqual(fields);
    }
    expect(await counts()).toEqual(before);
    const edge = await app.request("POST", "/public/v1/appointments", {
      key: KEY,
      body: { ...base, startsAt: "9999-12-31T23:00:00Z", endsAt: "9999-12-31T23:59:59.999Z" },
    });
    expect(edge.status).toBe(201);
    expect(edge.body.endsAt).toBe("9999-12-31T23:59:59.999Z");
    // PATCH: an overflowing endsAt is 422 and changes nothing.
    const patch = await app.request("PATCH", `/public/v1/appointments/${edge.body.id}`, {
      key: KEY,
      body: { endsAt: "9999-12-31T23:30:00-01:00" },
    });
    expect(fieldsOf(expectEnvelope(patch, 422, "VALIDATION_ERROR"))).toEqual(["endsAt"]);
    const again = await app.db.prisma.appointment.findUniqueOrThrow({
      where: { tenantId_id: { tenantId: acme.id, id: edge.body.id } },
    });
    expect(again.endsAt.toISOString()).toBe("9999-12-31T23:59:59.999Z");
  });

  it("crafted cursors carrying year 0000 → 422, not a 500", async () => {
    const contacts = Buffer.from(`0000-01-01T00:00:00.000Z|${acme.contacts.bea}`).toString("base64url");
    expectEnvelope(
      await app.request("GET", "/public/v1/contacts", { key: KEY, query: { cursor: contacts } }),
      422,
      "VALIDATION_ERROR",
    );
    const messages = Buffer.from(JSON.stringify({ t: "0000-01-01T00:00:00.000Z", i: acme.contacts.bea })).toString(
      "base64url",
    );
    const r = await app.request("GET", `/public/v1/conversations/${acme.conversations.web}/messages`, {
      key: KEY,
      query: { cursor: messages },
    });
    expect(fieldsOf(expectEnvelope(r, 422, "VALIDATION_ERROR"))).toEqual(["cursor"]);
  });

  it("the fixture loader refuses such dates with a clear message and loads nothing", async () => {
    const tenants = await app.db.prisma.tenant.count();
    await expect(
      app.load(
        fixture(tenant("bad-date", { leads: [{ ref: "x", customerName: "X", createdAt: "0000-01-01T00:00:00Z" }] })),
      ),
    ).rejects.toThrow(
      /tenants\.0\.leads\.0\.createdAt: must be between 0001-01-01T00:00:00\.000Z and 9999-12-31T23:59:59\.999Z/,
    );
    await expect(
      app.load(
        fixture(
          tenant("bad-date2", {
            users: [{ ref: "u" }],
            appointments: [
              {
                ref: "a",
                assignedTo: "u",
                title: "t",
                appointmentType: "v",
                startsAt: "9999-12-31T23:00:00Z",
                endsAt: "9999-12-31T23:00:00-02:00",
              },
            ],
          }),
        ),
      ),
    ).rejects.toThrow(/appointments\.0\.endsAt: must be between/);
    expect(await app.db.prisma.tenant.count()).toBe(tenants);
  });
});

describe("phone numbers longer than E.164's 15 digits → 422 before the database", () => {
  // 16–25 digits
  const overLong = Array.from({ length: 10 }, (_, i) => `+4930${"1234567890123456789012".slice(0, 12 + i)}`);

  it("POST /contacts: the issue's number and 16–25 digits, with and without +; nothing persisted", async () => {
    const before = await counts();
    for (const phone of ["+49301234567890123", ...overLong, ...overLong.map((p) => p.slice(1))]) {
      const r = await app.request("POST", "/public/v1/contacts", { key: KEY, body: { phone } });
      const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
      expect(b.details.fields).toEqual([expect.objectContaining({ field: "phone", code: "invalid_phone" })]);
    }
    expect(await counts()).toEqual(before);
    const ok = await app.request("POST", "/public/v1/contacts", { key: KEY, body: { phone: "+4930123456789" } });
    expect(ok.status).toBe(201);
    expect(ok.body.phone).toBe("+4930123456789");
  });

  it("POST /conversations/start: 422 naming phone, nothing stored and no send", async () => {
    const before = await counts();
    const r = await app.request("POST", "/public/v1/conversations/start", {
      key: KEY,
      body: {
        channelId: acme.channels.wa,
        phone: "+49301234567890123",
        templateName: "welcome",
        templateLanguage: "en",
        variables: ["a", "b"],
      },
    });
    expect(fieldsOf(expectEnvelope(r, 422, "VALIDATION_ERROR"))).toEqual(["phone"]);
    expect(await counts()).toEqual(before);
  });

  it("POST /leads: an over-long customerPhone (free text, 1–20 characters) is stored as sent and matches no contact", async () => {
    const r = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      body: { customerName: "Long", customerPhone: "+3460000000123456" },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ customerPhone: "+3460000000123456", customerId: null });
  });

  it("the fixture loader refuses an over-long contact phone with a clear message", async () => {
    await expect(
      app.load(fixture(tenant("bad-phone", { contacts: [{ ref: "c", phone: "+49301234567890123" }] }))),
    ).rejects.toThrow(/contact "c": invalid phone "\+49301234567890123" \(E\.164 allows at most 15 digits\)/);
  });
});

describe("deeply nested bodies → 422 after the scope check", () => {
  const nested = (levels: number, inner = "1") => "[".repeat(levels) + inner + "]".repeat(levels);

  it("beyond 32 levels (here up to 5,000, objects and arrays) → 422 too_deep; nothing persisted", async () => {
    const before = await counts();
    for (const raw of [
      `{"customerName":"x","notes":${nested(5000)}}`,
      `{"customerName":"x","zz":${nested(32)}}`, // 33 with the body object
      `{"customerName":"x","budget":${'{"a":'.repeat(3000)}1${"}".repeat(3000)}}`,
      `{"customerName":"[[[[","notes":${nested(40, '"]]]]"')}}`,
    ]) {
      const r = await app.request("POST", "/public/v1/leads", {
        key: KEY,
        raw,
        headers: { "Content-Type": "application/json", "Idempotency-Key": "deep" },
      });
      const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
      expect(b.details.fields).toEqual([expect.objectContaining({ field: "(body)", code: "too_deep" })]);
    }
    expect(await counts()).toEqual(before);
  });

  it("32 levels are read (then refused by the schema as usual); brackets inside strings do not count", async () => {
    const r = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      raw: `{"customerName":"x","zz":${nested(31)}}`,
      headers: { "Content-Type": "application/json" },
    });
    expect(expectEnvelope(r, 422, "VALIDATION_ERROR").details.fields).toEqual([
      expect.objectContaining({ field: "zz", code: "unknown_field" }),
    ]);
    const s = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      body: { customerName: "[".repeat(200), notes: "{".repeat(5000) },
    });
    expect(s.status).toBe(201);
  });

  it("a key without the scope gets 403 first", async () => {
    const r = await app.request("POST", "/public/v1/leads", {
      key: acme.apiKeys.none!.key,
      raw: `{"x":${nested(5000)}}`,
      headers: { "Content-Type": "application/json" },
    });
    expectEnvelope(r, 403, "PERMISSION_DENIED");
  });

  it("/trpc: deep mutation bodies and deep query inputs → 422 in the tRPC shape with the envelope", async () => {
    const post = await fetch(`${app.url}/trpc/leads.create`, {
      method: "POST",
      headers: { "X-API-Key": KEY, "Content-Type": "application/json" },
      body: `{"customerName":"x","notes":${nested(5000)}}`,
    });
    expect(post.status).toBe(422);
    expect((await json(post)).error.data.envelope).toMatchObject({
      error: "VALIDATION_ERROR",
      details: { fields: [{ code: "too_deep" }] },
    });
    const get = await fetch(`${app.url}/trpc/leads.list?input=${encodeURIComponent(nested(1000))}`, {
      headers: { "X-API-Key": KEY },
    });
    expect(get.status).toBe(422);
    expect((await json(get)).error.data.envelope).toMatchObject({
      error: "VALIDATION_ERROR",
      details: { fields: [{ field: "input", code: "too_deep" }] },
    });
    // A deep input behind another one: two inputs are refused as such (tRPC would read only the first).
    const twice = await fetch(`${app.url}/trpc/leads.list?input=%7B%7D&input=${encodeURIComponent(nested(1000))}`, {
      headers: { "X-API-Key": KEY },
    });
    expect(twice.status).toBe(422);
    expect((await json(twice)).error.data.envelope).toMatchObject({
      error: "VALIDATION_ERROR",
      details: { fields: [{ field: "input", code: "duplicate" }] },
    });
  });
});

describe("deep fixture documents", () => {
  it("the fixture loader (admin load, /trpc-admin loadFixture) refuses nesting beyond 32 levels", async () => {
    const deepConfig = JSON.parse(`{"a":${"[".repeat(5000)}${"]".repeat(5000)}}`);
    const doc = fixture(tenant("deep-config", { channels: [{ ref: "c", kind: "web", config: deepConfig }] }));
    await expect(app.load(doc)).rejects.toThrow(/nested deeper than 32 levels/);
    const res = await fetch(`${app.url}/trpc-admin/loadFixture`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: `{"tenants":[{"ref":"deep","channels":[{"ref":"c","kind":"web","config":{"a":${"[".repeat(5000)}${"]".repeat(5000)}}}]}]}`,
    });
    expect(res.status).toBe(400);
    expect((await json(res)).error.message).toMatch(/nested deeper than 32 levels/);
    expect(await app.db.prisma.tenant.count({ where: { name: { in: ["deep", "deep-config"] } } })).toBe(0);
  });
});

describe("backstop: data-class SQLSTATEs → 422, conflicts → 503, logged in one place", () => {
  // Stand-ins for a value the schemas let through but the database refuses: a test-only CHECK and a
  // trigger raising a chosen SQLSTATE for a chosen customerName.
  beforeAll(async () => {
    await app.db.prisma.$executeRawUnsafe(
      `ALTER TABLE "Lead" ADD CONSTRAINT "Lead_test_notes_check" CHECK ("notes" IS DISTINCT FROM 'forbidden')`,
    );
    await app.db.prisma.$executeRawUnsafe(`
      CREATE FUNCTION test_raise() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW."customerName" LIKE 'raise-%' THEN RAISE EXCEPTION 'test' USING ERRCODE = substr(NEW."customerName", 7, 5); END IF;
        RETURN NEW;
      END $$`);
    await app.db.prisma.$executeRawUnsafe(
      `CREATE TRIGGER test_raise BEFORE INSERT ON "Lead" FOR EACH ROW EXECUTE FUNCTION test_raise()`,
    );
  });
  afterAll(async () => {
    await app.db.prisma.$executeRawUnsafe(`DROP TRIGGER test_raise ON "Lead"`);
    await app.db.prisma.$executeRawUnsafe(`DROP FUNCTION test_raise()`);
    await app.db.prisma.$executeRawUnsafe(`ALTER TABLE "Lead" DROP CONSTRAINT "Lead_test_notes_check"`);
  });

  it("23514 check_violation and 22xxx data exceptions → 422 VALIDATION_ERROR, warn log with the request id, nothing persisted", async () => {
    await withCapturedLogs(async (lines) => {
      const before = await counts();
      const check = await app.request("POST", "/public/v1/leads", {
        key: KEY,
        body: { customerName: "ok", notes: "forbidden" },
        headers: { "Idempotency-Key": "backstop-1" },
      });
      expect(expectEnvelope(check, 422, "VALIDATION_ERROR").details.fields).toEqual([
        expect.objectContaining({ code: "check_violation" }),
      ]);
      for (const state of ["22003", "22008", "22P02", "22001"]) {
        const r = await app.request("POST", "/public/v1/leads", { key: KEY, body: { customerName: `raise-${state}` } });
        expect(expectEnvelope(r, 422, "VALIDATION_ERROR").details.fields).toEqual([
          expect.objectContaining({ code: "invalid_value" }),
        ]);
      }
      expect(await counts()).toEqual(before);
      const warned = lines.filter((l) => l.msg === "input refused by the database");
      expect(warned.map((l) => l.sqlState)).toEqual(["23514", "22003", "22008", "22P02", "22001"]);
      expect(warned[0]).toMatchObject({ level: 40, reqId: check.body.request_id, constraint: "Lead_test_notes_check" });
      expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    });
  });

  it("the /trpc transport maps and logs the same way", async () => {
    await withCapturedLogs(async (lines) => {
      const res = await fetch(`${app.url}/trpc/leads.create`, {
        method: "POST",
        headers: { "X-API-Key": KEY, "Content-Type": "application/json", "X-Request-Id": "trpc-backstop-1" },
        body: JSON.stringify({ customerName: "raise-22008" }),
      });
      expect(res.status).toBe(422);
      expect((await json(res)).error.data.envelope).toMatchObject({
        error: "VALIDATION_ERROR",
        request_id: "trpc-backstop-1",
      });
      expect(lines.filter((l) => l.msg === "input refused by the database")).toEqual([
        expect.objectContaining({ reqId: "trpc-backstop-1", sqlState: "22008" }),
      ]);
    });
  });

  it("40P01 deadlock and 40001 serialization failure → 503 SERVICE_UNAVAILABLE, never 500", async () => {
    const before = await counts();
    for (const state of ["40P01", "40001"]) {
      const r = await app.request("POST", "/public/v1/leads", { key: KEY, body: { customerName: `raise-${state}` } });
      expectEnvelope(r, 503, "SERVICE_UNAVAILABLE");
    }
    expect(await counts()).toEqual(before);
  });
});

describe("validation details are capped", () => {
  it("up to 1,000 fields are read: unknown keys are listed 50 at most, with the count of all problems", async () => {
    const body: Record<string, unknown> = { customerName: "x" };
    for (let i = 0; i < 999; i++) body[i.toString(36)] = i;
    const r = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      body,
      headers: { "Idempotency-Key": "many-keys" },
    });
    const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
    expect(b.details.fields).toHaveLength(50);
    expect(b.details.fields[0]).toEqual({ field: "0", code: "unknown_field", message: "Unknown field" });
    expect(b.details).toMatchObject({ fieldCount: 999, truncated: true });
    expect(r.text.length).toBeLessThan(8_000);
    // Under the cap: everything listed, not truncated.
    const few = await app.request("POST", "/public/v1/leads", { key: KEY, body: { customerName: "x", a: 1, b: 2 } });
    expect(expectEnvelope(few, 422, "VALIDATION_ERROR").details).toEqual({
      fields: [expect.objectContaining({ field: "a" }), expect.objectContaining({ field: "b" })],
      fieldCount: 2,
      truncated: false,
    });
  });

  it("a 1 MiB body of tiny keys is refused from its text, before parsing: small answer, bounded work", async () => {
    const before = await counts();
    let raw = '{"customerName":"x"';
    let n = 0;
    while (raw.length < 1024 * 1024 - 32) raw += `,"${(n++).toString(36)}":1`;
    raw += "}";
    const started = performance.now();
    const r = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      raw,
      headers: { "Content-Type": "application/json", "Idempotency-Key": "many-keys-2" },
    });
    const ms = performance.now() - started;
    expect(expectEnvelope(r, 422, "VALIDATION_ERROR").details.fields).toEqual([
      expect.objectContaining({ field: "(body)", code: "too_many_fields" }),
    ]);
    expect(r.text.length).toBeLessThan(1_000);
    console.log(`1 MiB body of ${n} tiny keys: ${r.text.length} bytes of 422 in ${ms.toFixed(0)} ms (round trip)`);
    // 1,001 members in all (nested ones count too) is one too many.
    const nested = JSON.stringify({
      customerName: "x",
      budget: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i])),
    });
    const over = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      raw: nested,
      headers: { "Content-Type": "application/json" },
    });
    expect(expectEnvelope(over, 422, "VALIDATION_ERROR").details.fields).toEqual([
      expect.objectContaining({ code: "too_many_fields" }),
    ]);
    expect(await counts()).toEqual(before);
  });

  it("the same cap over /trpc", async () => {
    const body: Record<string, number> = { customerName: 0 };
    for (let i = 0; i < 500; i++) body[`k${i}`] = i;
    const res = await fetch(`${app.url}/trpc/leads.create`, {
      method: "POST",
      headers: { "X-API-Key": KEY, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(422);
    const env = (await json(res)).error.data.envelope;
    expect(env.details.fields).toHaveLength(50);
    expect(env.details).toMatchObject({ fieldCount: 501, truncated: true });
  });
});

describe("ids are normalised to lower case once, at the input schema", () => {
  const up = (id: string) => id.toUpperCase();

  it("path, query and body ids in upper case find the same objects; responses carry lower case", async () => {
    const lead = await app.request("GET", `/public/v1/leads/${up(acme.leads.l1!)}`, { key: KEY });
    expect(lead.status).toBe(200);
    expect(lead.body.id).toBe(acme.leads.l1);
    const filtered = await app.request("GET", "/public/v1/leads", {
      key: KEY,
      query: { customerId: up(acme.contacts.bea!) },
    });
    expect(filtered.body.items.map((l: { id: string }) => l.id)).toEqual([acme.leads.l1]);
    const ticket = await app.request("PATCH", `/public/v1/tickets/${up(acme.tickets.t1!)}`, {
      key: KEY,
      body: { assignedTo: up(acme.users.ana!) },
    });
    expect(ticket.status).toBe(200);
    expect(ticket.body).toMatchObject({ id: acme.tickets.t1, assignedTo: acme.users.ana });
    const appt = await app.request("POST", "/public/v1/appointments", {
      key: KEY,
      body: {
        assignedUserId: up(acme.users.ana!),
        customerId: up(acme.contacts.bea!),
        title: "Case",
        appointmentType: "visit",
        startsAt: "2031-03-03T10:00:00Z",
        endsAt: "2031-03-03T11:00:00Z",
      },
    });
    expect(appt.status).toBe(201);
    expect(appt.body).toMatchObject({ assignedUserId: acme.users.ana, customerId: acme.contacts.bea });
    const viaTrpc = await fetch(
      `${app.url}/trpc/leads.get?input=${encodeURIComponent(JSON.stringify({ lead_id: up(acme.leads.l1!) }))}`,
      { headers: { "X-API-Key": KEY } },
    );
    expect((await json(viaTrpc)).result.data.id).toBe(acme.leads.l1);
  });

  it("an Idempotency-Key retry that spells an id in another case is the same request (replayed)", async () => {
    const body = (stageId: string) => ({ customerName: "Case retry", stageId });
    const first = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      body: body(acme.stages.won!),
      headers: { "Idempotency-Key": "case-1" },
    });
    expect(first.status).toBe(201);
    const retry = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      body: body(up(acme.stages.won!)),
      headers: { "Idempotency-Key": "case-1" },
    });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.body.id).toBe(first.body.id);
  });

  it.skipIf(!onPostgres)("the calendar lock is the same for every spelling of the user id", async () => {
    // Hold the lock for the lower-case id; a create naming the user in upper case must wait for it.
    const release = await holdCalendarLock(app.db, acme.id, acme.users.ana!);
    let done = false;
    const create = app
      .request("POST", "/public/v1/appointments", {
        key: KEY,
        body: {
          assignedUserId: up(acme.users.ana!),
          title: "Locked",
          appointmentType: "visit",
          startsAt: "2031-04-04T10:00:00Z",
          endsAt: "2031-04-04T11:00:00Z",
        },
      })
      .finally(() => (done = true));
    await waitForLockWaiters(app.testDb, 1, { locktype: "advisory" });
    expect(done).toBe(false);
    await release();
    expect((await create).status).toBe(201);
  });
});

describe("GET /public/v1/openapi.json is public for GET and HEAD only", () => {
  it("GET and HEAD need no key", async () => {
    expect((await fetch(`${app.url}/public/v1/openapi.json`)).status).toBe(200);
    expect((await fetch(`${app.url}/public/v1/openapi.json`, { method: "HEAD" })).status).toBe(200);
  });

  it("any other method gets the guard's 401 (with quota headers) before the body is read", async () => {
    for (const method of ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]) {
      for (const path of ["/public/v1/openapi.json", "/PUBLIC/V1/OpenAPI.json"]) {
        // A body over the limit would be 413 if it were read first.
        const res = await fetch(`${app.url}${path}`, {
          method,
          headers: { "Content-Type": "application/json" },
          body: method === "OPTIONS" ? undefined : "x".repeat(2 * 1024 * 1024),
        });
        expect(res.status, `${method} ${path}`).toBe(401);
        expect(res.headers.get("x-ratelimit-limit")).toMatch(/^\d+$/);
        expect((await json(res)).error).toBe("INVALID_CREDENTIALS");
      }
    }
    // With a key it is an unknown operation like any other.
    expectEnvelope(await app.request("POST", "/public/v1/openapi.json", { key: KEY, body: {} }), 404, "NOT_FOUND");
  });
});

describe("JSON media types are accepted consistently", () => {
  const variants = [
    "application/vnd.api+json",
    "Application/JSON",
    "APPLICATION/JSON; charset=UTF-8",
    "application/json;charset=utf-8",
    "application/merge-patch+json",
    "application/problem+json ; x=y",
  ];

  it("each variant with a valid body succeeds on POST and PATCH", async () => {
    for (const type of variants) {
      const created = await app.request("POST", "/public/v1/leads", {
        key: KEY,
        raw: JSON.stringify({ customerName: `Type ${type}` }),
        headers: { "Content-Type": type },
      });
      expect(created.status, type).toBe(201);
      const patched = await app.request("PATCH", `/public/v1/leads/${created.body.id}`, {
        key: KEY,
        raw: JSON.stringify({ notes: type }),
        headers: { "Content-Type": type },
      });
      expect(patched.status, type).toBe(200);
      expect(patched.body.notes).toBe(type);
    }
  });

  it("a key without the scope gets 403 first, for each variant", async () => {
    for (const type of [...variants, "text/plain"]) {
      const r = await app.request("POST", "/public/v1/leads", {
        key: acme.apiKeys.none!.key,
        raw: JSON.stringify({ customerName: "x" }),
        headers: { "Content-Type": type },
      });
      expectEnvelope(r, 403, "PERMISSION_DENIED");
    }
  });

  it("other media types stay 422 with the header named", async () => {
    const before = await counts();
    for (const type of [
      "text/plain",
      "application/jsonx",
      "application/json-seq",
      "application/x-www-form-urlencoded",
      "json",
      "application/+json",
    ]) {
      const r = await app.request("POST", "/public/v1/leads", {
        key: KEY,
        raw: JSON.stringify({ customerName: "x" }),
        headers: { "Content-Type": type },
      });
      expect(fieldsOf(expectEnvelope(r, 422, "VALIDATION_ERROR")), type).toEqual(["Content-Type"]);
    }
    expect(await counts()).toEqual(before);
  });

  it("/trpc accepts the same variants", async () => {
    for (const type of ["application/vnd.api+json", "Application/JSON"]) {
      const res = await fetch(`${app.url}/trpc/leads.create`, {
        method: "POST",
        headers: { "X-API-Key": KEY, "Content-Type": type },
        body: JSON.stringify({ customerName: `trpc ${type}` }),
      });
      expect(res.status, type).toBe(200);
    }
    const bad = await fetch(`${app.url}/trpc/leads.create`, {
      method: "POST",
      headers: { "X-API-Key": KEY, "Content-Type": "text/plain" },
      body: JSON.stringify({ customerName: "x" }),
    });
    expect(bad.status).toBe(422);
  });
});

describe("case and spelling variants of the guarded prefixes", () => {
  const me = "me.get?input=%7B%7D";

  it("/trpc in any letter case (and /trpc//…) passes the guard: 401 with quota headers without a key, counted with one", async () => {
    for (const prefix of ["/TRPC", "/Trpc", "/tRPC", "/trpc/"]) {
      const anon = await fetch(`${app.url}${prefix}/${me}`);
      expect(anon.status, prefix).toBe(401);
      expect(anon.headers.get("x-ratelimit-limit"), prefix).toMatch(/^\d+$/);
      expect((await json(anon)).error.data.envelope.error).toBe("INVALID_CREDENTIALS");
      const a = await fetch(`${app.url}${prefix}/${me}`, { headers: { "X-API-Key": KEY } });
      const b = await fetch(`${app.url}${prefix}/${me}`, { headers: { "X-API-Key": KEY } });
      expect(Number(b.headers.get("x-ratelimit-remaining")), prefix).toBe(
        Number(a.headers.get("x-ratelimit-remaining")) - 1,
      );
    }
  });

  it("encoded spellings reach no procedure", async () => {
    for (const path of [`/%74rpc/${me}`, `/trpc%2F${me}`, `/%2Ftrpc/${me}`, `/trp%63/${me}`]) {
      const res = await fetch(`${app.url}${path}`, { headers: { "X-API-Key": KEY } });
      expect([401, 404], path).toContain(res.status);
      expect(await res.text()).not.toContain(acme.id);
    }
  });

  it("/public/v1 in any case passes the guard", async () => {
    for (const prefix of ["/PUBLIC/V1", "/Public/v1", "/public/V1"]) {
      const anon = await fetch(`${app.url}${prefix}/me`);
      expect(anon.status, prefix).toBe(401);
      expect(anon.headers.get("x-ratelimit-limit"), prefix).toMatch(/^\d+$/);
      const res = await fetch(`${app.url}${prefix}/leads`, { headers: { "X-API-Key": KEY } });
      expect(res.headers.get("x-ratelimit-remaining"), prefix).toMatch(/^\d+$/);
      expect([200, 404], prefix).toContain(res.status);
    }
  });

  it("/trpc-admin in any case needs the internal token", async () => {
    for (const prefix of ["/TRPC-ADMIN", "/Trpc-Admin", "/trpc-admin/"]) {
      const res = await fetch(`${app.url}${prefix}/setPlan`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ tenantId: acme.id, plan: "starter" }),
      });
      expect(res.status, prefix).toBe(401);
    }
    expect((await app.db.prisma.tenant.findUniqueOrThrow({ where: { id: acme.id } })).plan).toBe("pro");
  });
});

describe("DATABASE_URL without REDIS_URL", () => {
  const started = async (env: Record<string, string>) => {
    const lines: any[] = [];
    const logger = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) }) as unknown as Logger;
    const services = await createServices(loadConfig(env), { db: app.db, logger });
    services.redis?.disconnect();
    return lines.filter((l) => l.level === 40 && /REDIS_URL/.test(String(l.msg))).map((l) => String(l.msg));
  };

  it("logs a warning at start; not with REDIS_URL, nor on the embedded database", async () => {
    expect(await started({ DATABASE_URL: "postgresql://db.example/crm" })).toEqual([
      expect.stringContaining("without REDIS_URL"),
    ]);
    expect(await started({ DATABASE_URL: "postgresql://db.example/crm", REDIS_URL: "redis://127.0.0.1:1" })).toEqual(
      [],
    );
    expect(await started({})).toEqual([]);
  });
});
