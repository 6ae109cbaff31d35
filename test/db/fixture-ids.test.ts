// The fixture format's optional `id` (README "Admin CLI"): an object may carry its own
// UUID, so that its id is known before the load (the demo tenant's, which the OpenAPI document's
// examples name). Stored in lower case; refused when malformed, used twice in a kind, or already in
// use in the database (any tenant) — with nothing of the document persisted.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FixtureError, loadFixture, type FixtureInput } from "../../server/admin/fixture.js";
import { demoFixture, DEMO_IDS } from "../../server/admin/demo.js";
import { freshDatabase, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const U = (n: number) => `0b9d3c4e-5f61-4a72-8b93-${String(n).padStart(12, "0")}`;

/** A tenant whose objects of every kind that may carry an id carry one (contact ids in upper case). */
function withIds(ref: string, base: number): FixtureInput {
  const f = fixture(
    tenant(ref, {
      contactLists: [{ ref: "vip", id: U(base + 1), name: "VIP" }],
      contacts: [
        { ref: "bea", id: U(base + 2).toUpperCase(), fullName: "Bea Soto", phone: "+34600000001", lists: ["vip"] },
      ],
      conversations: [
        {
          ref: "c1",
          id: U(base + 3),
          channel: "wa",
          identity: { externalId: "34600000001", contact: "bea" },
          messages: [{ role: "user", content: "Hi" }],
        },
      ],
      leads: [{ ref: "l1", id: U(base + 4), customerName: "Bea Soto", contact: "bea", conversation: "c1" }],
      appointments: [
        {
          ref: "a1",
          id: U(base + 5),
          assignedTo: "ana",
          title: "Viewing",
          appointmentType: "visit",
          startsAt: "2027-03-02T09:00:00Z",
          endsAt: "2027-03-02T10:00:00Z",
          contact: "bea",
        },
      ],
      tickets: [{ ref: "t1", id: U(base + 6), subject: "Broken link", createdBy: "ana", contact: "bea" }],
    }),
  );
  const t = f.tenants[0]!;
  t.users![0]!.id = U(base + 7);
  t.stages![0]!.id = U(base + 8);
  t.channels![0]!.id = U(base + 9);
  return f;
}

let app: TestApp;
beforeAll(async () => {
  app = await startApp();
}, 120_000);
afterAll(() => app?.close());

const counts = async () => ({
  tenants: await app.db.prisma.tenant.count(),
  contacts: await app.db.prisma.contact.count(),
  leads: await app.db.prisma.lead.count(),
});

describe("fixture objects with their own ids", () => {
  it("loads every kind with the given ids (lower case), in the id map and in the API", async () => {
    const ids = (await app.load(withIds("acme", 100))).tenants.acme!;
    expect(ids.contactLists.vip).toBe(U(101));
    expect(ids.contacts.bea).toBe(U(102)); // given in upper case
    expect(ids.conversations.c1).toBe(U(103));
    expect(ids.leads.l1).toBe(U(104));
    expect(ids.appointments.a1).toBe(U(105));
    expect(ids.tickets.t1).toBe(U(106));
    expect(ids.users.ana).toBe(U(107));
    expect(ids.stages.new).toBe(U(108));
    expect(ids.channels.wa).toBe(U(109));
    // Objects without an id still get one made by the loader.
    expect(ids.users.bob).toMatch(/^[0-9a-f-]{36}$/);
    expect(ids.users.bob).not.toBe(U(107));
    const key = ids.apiKeys.full!.key;
    const lead = await app.request("GET", `/public/v1/leads/${U(104)}`, { key });
    expect(lead.status).toBe(200);
    expect(lead.body).toMatchObject({ id: U(104), customerId: U(102), conversationId: U(103), stageId: U(108) });
    const contacts = await app.request("GET", "/public/v1/contacts", { key, query: { listId: U(101) } });
    expect(contacts.body.items.map((c: { id: string }) => c.id)).toEqual([U(102)]);
    const tickets = await app.request("GET", "/public/v1/tickets", { key, query: { customerId: U(102) } });
    expect(tickets.body.items.map((t: { id: string }) => t.id)).toEqual([U(106)]);
  });

  it("refuses an id already in use — another tenant's too — and an id twice in one kind, persisting nothing", async () => {
    const before = await counts();
    // The same document again: tenant "acme2" would reuse every id of "acme".
    const again = withIds("acme2", 100);
    await expect(app.load(again)).rejects.toThrow(FixtureError);
    await expect(app.load(again)).rejects.toThrow(
      /tenant "acme2" user "ana": id 0b9d3c4e-5f61-4a72-8b93-000000000107 is already in use/,
    );
    // One taken id among fresh ones, in a later kind: the contact's (given in upper case).
    const one = withIds("acme3", 200);
    one.tenants[0]!.contacts![0]!.id = U(102).toUpperCase();
    await expect(app.load(one)).rejects.toThrow(
      /tenant "acme3" contact "bea": id 0b9d3c4e-5f61-4a72-8b93-000000000102 is already in use/,
    );
    // Twice within one kind of one document.
    const twice = withIds("acme4", 300);
    twice.tenants[0]!.leads!.push({ ref: "l2", id: U(304), customerName: "Carlos Gil" });
    await expect(app.load(twice)).rejects.toThrow(
      /tenant "acme4" lead "l2": id 0b9d3c4e-5f61-4a72-8b93-000000000304 is already lead "l1"'s/,
    );
    // Two tenants of one document with the same id: the second is refused, the first rolled back.
    const pair = withIds("acme5", 400);
    pair.tenants.push(withIds("acme6", 400).tenants[0]!);
    await expect(app.load(pair)).rejects.toThrow(/tenant "acme6" user "ana": id .* is already in use/);
    expect(await counts()).toEqual(before);
  });

  it("refuses a malformed id before anything is written", async () => {
    const before = await counts();
    const bad = withIds("acme7", 500);
    bad.tenants[0]!.tickets![0]!.id = "not-a-uuid";
    await expect(app.load(bad)).rejects.toThrow(/invalid fixture at tenants\.0\.tickets\.0\.id: expected a UUID/);
    expect(await counts()).toEqual(before);
  });
});

describe("the demo fixture", () => {
  it("with fixedIds carries DEMO_IDS, loads once per database; without, it loads any number of times", async () => {
    const fresh = await freshDatabase();
    const db = fresh.db;
    try {
      const ids = (await loadFixture(db, demoFixture(new Date(), { fixedIds: true }))).tenants.demo!;
      for (const kind of Object.keys(DEMO_IDS) as (keyof typeof DEMO_IDS)[])
        expect(ids[kind], kind).toEqual(DEMO_IDS[kind]);
      const tenants = await db.prisma.tenant.count();
      await expect(loadFixture(db, demoFixture(new Date(), { fixedIds: true }))).rejects.toThrow(/is already in use/);
      expect(await db.prisma.tenant.count()).toBe(tenants);
      const a = (await loadFixture(db, demoFixture())).tenants.demo!;
      const b = (await loadFixture(db, demoFixture())).tenants.demo!;
      expect(a.leads.l1).not.toBe(b.leads.l1);
      expect(a.leads.l1).not.toBe(DEMO_IDS.leads.l1);
      expect(await db.prisma.tenant.count()).toBe(tenants + 2);
    } finally {
      await fresh.drop();
    }
  }, 120_000);
});
