// The demo tenant loaded by the first `npm start` on an empty embedded database, how it is found
// again (the admin verb demo-key, the later starts' line), and what a start says about the tenants.
import type { Database } from "../db/client.js";
import type { FixtureInput } from "./fixture.js";

/** The demo tenant is the one with this name and a user with DEMO_OWNER_EMAIL (the owner of its keys). */
export const DEMO_TENANT_NAME = "Demo Realty";
export const DEMO_OWNER_EMAIL = "ana@demo.test";

/** The admin command that prints a new key of the demo tenant (server/admin/cli.ts). */
export const DEMO_KEY_COMMAND = "npm run --silent admin -- demo-key";
export const LOAD_COMMAND = "npm run --silent admin -- load FILE";
export const LOAD_DEMO_COMMAND = "npm run --silent admin -- load-demo";

/**
 * The demo tenant (and its owner user), or undefined. Should there be several (the demo fixture
 * loaded into one PostgreSQL database more than once), the oldest: always the same one.
 */
export async function findDemoTenant(db: Database): Promise<{ tenantId: string; ownerId: string } | undefined> {
  const owner = await db.prisma.user.findFirst({
    where: { email: DEMO_OWNER_EMAIL, tenant: { name: DEMO_TENANT_NAME } },
    orderBy: [{ tenant: { createdAt: "asc" } }, { tenantId: "asc" }],
    select: { id: true, tenantId: true },
  });
  return owner ? { tenantId: owner.tenantId, ownerId: owner.id } : undefined;
}

/** The base URL a local client reaches the service at: HOST and PORT, a wildcard address as loopback. */
export function localBaseUrl(host: string, port: number): string {
  const h = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return `http://${h.includes(":") ? `[${h}]` : h}:${port}`;
}

/** The sample request printed with a key. */
export function curlLine(key: string, baseUrl: string): string {
  return `curl -s -H 'X-API-Key: ${key}' ${baseUrl}/public/v1/me`;
}

/**
 * The line a start logs about the tenants, when there is something to say: on a
 * database without any tenant, the next step (the admin CLI's load); on one with the demo tenant,
 * how to get a new key of it (on the embedded database the CLI needs the service stopped: one
 * process per folder). Nothing otherwise (a production database). Two small queries, once per start.
 */
export async function tenantsNotice(
  db: Database,
  embedded: boolean,
): Promise<{ msg: string; tenantId?: string } | undefined> {
  const stop = embedded ? "stop the service (the embedded database allows one process), then run " : "run ";
  if (!(await db.prisma.tenant.findFirst({ select: { id: true } })))
    return {
      msg:
        `the ${embedded ? "embedded " : ""}database has no tenant yet: for the demo tenant, ` +
        `${stop}${LOAD_DEMO_COMMAND}; for your own tenants, users and API keys, ` +
        `${LOAD_COMMAND} (README.md, "Admin CLI")`,
    };
  const demo = await findDemoTenant(db);
  if (!demo) return undefined;
  // demo-key works while the service runs (on the embedded database through this service: server/admin/live.ts).
  return { msg: `demo tenant ${demo.tenantId}: for a new API key, run ${DEMO_KEY_COMMAND}`, tenantId: demo.tenantId };
}

/**
 * The ids of the demo's objects as the first start loads them (the fixture format's optional `id`):
 * known in advance, so the OpenAPI document's examples (rest/examples.ts) name objects that exist in
 * the demo tenant and Swagger UI's "Try it out" succeeds with the demo key. Random-looking UUIDs, as
 * the service makes them.
 */
export const DEMO_IDS = {
  users: { ana: "1b205cd4-5d5a-4a74-bb15-c515e0f11a97", luis: "d8bddbe4-d893-4e4b-ac59-923c67fbfeee" },
  stages: {
    new: "572afef1-54ad-45e5-835e-8afc0a4ec350",
    qualified: "864f5cdb-0236-4732-b381-37e3deff1c73",
    won: "861eb1a7-1485-4ea7-a26d-00e324ed611d",
  },
  channels: { wa: "ee1ca5e3-c104-40be-abb8-ebb5b5cefd70", site: "cc6d9e4b-4541-49c3-b341-e6de5fb750e0" },
  contactLists: { vip: "ec82acfc-882f-41b2-918f-043cf94e448c" },
  contacts: { bea: "fa916082-0e75-40eb-98ce-d58e2c312496", carlos: "02ae08d4-490e-4c4b-a8b1-9423a20aa979" },
  conversations: { c1: "9ea29cb6-bef2-4754-9faf-9c7b56c2d6f7", c2: "87bb9c5e-e44c-4bc0-a2c1-1267321ef08d" },
  leads: { l1: "5f35a93a-f250-4e2a-bb7c-d4cd013e4a09", l2: "1fd270df-ae7f-41e8-9f8e-ecc3253d9e33" },
  appointments: { a1: "c763cfb3-280d-41d6-baf0-4728f59fbf41" },
  tickets: { t1: "83381faa-18ff-4db9-bcc9-a930bd5ef904" },
} as const;

/**
 * The external ids the demo's objects carry (the fixture format's `externalId`, with or without
 * `fixedIds`): the demo tenant mirrors Bea Soto and her lead with a CRM and her ticket with a
 * helpdesk, so the lists' `externalId` filter and the PUTs by external id of the OpenAPI document's
 * examples (rest/examples.ts) find them.
 */
export const DEMO_EXTERNAL_IDS = {
  contacts: { bea: "crm-10042" },
  leads: { l1: "crm-deal-311" },
  tickets: { t1: "hd-58230" },
} as const;

/**
 * The demo tenant's fixture, its times relative to `now`. With `fixedIds` (the first start of the
 * embedded database, server/main.ts) its objects carry DEMO_IDS: such a fixture loads once per
 * database (an id names one object, server/admin/fixture/tenant.ts); without, the loader makes the
 * ids and it can be loaded any number of times.
 */
export function demoFixture(now = new Date(), opts: { fixedIds?: boolean } = {}): FixtureInput {
  const id = <K extends keyof typeof DEMO_IDS>(kind: K, ref: keyof (typeof DEMO_IDS)[K]) =>
    opts.fixedIds ? { id: DEMO_IDS[kind][ref] as string } : {};
  const day = (d: number, h = 0) =>
    new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + d, h)).toISOString();
  const weekdays = [1, 2, 3, 4, 5].map((weekday) => ({ weekday, start: "09:00", end: "17:00" }));
  return {
    tenants: [
      {
        ref: "demo",
        name: DEMO_TENANT_NAME,
        plan: "pro",
        timezone: "Europe/Madrid",
        defaultCountry: "ES",
        slotMinutes: 30,
        users: [
          {
            ref: "ana",
            ...id("users", "ana"),
            name: "Ana Ruiz",
            email: DEMO_OWNER_EMAIL,
            bookable: true,
            assignable: true,
            workingHours: weekdays,
          },
          {
            ref: "luis",
            ...id("users", "luis"),
            name: "Luis Vega",
            email: "luis@demo.test",
            bookable: true,
            assignable: true,
            workingHours: weekdays,
          },
        ],
        stages: [
          { ref: "new", ...id("stages", "new"), name: "New", defaultEntry: true },
          { ref: "qualified", ...id("stages", "qualified"), name: "Qualified" },
          { ref: "won", ...id("stages", "won"), name: "Won" },
        ],
        apiKeys: [{ ref: "demo", owner: "ana", scopes: "all" }],
        channels: [
          // A local address where nothing listens: sends are stored with deliveryStatus "failed".
          {
            ref: "wa",
            ...id("channels", "wa"),
            kind: "whatsapp",
            name: "WhatsApp",
            config: { baseUrl: "http://127.0.0.1:9", phoneNumberId: "1001", accessToken: "demo" },
          },
          { ref: "site", ...id("channels", "site"), kind: "web", name: "Website chat" },
        ],
        templates: [
          {
            ref: "welcome",
            channel: "wa",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}, this is {{2}}",
            approved: true,
          },
        ],
        contactLists: [{ ref: "vip", ...id("contactLists", "vip"), name: "VIP" }],
        contacts: [
          {
            ref: "bea",
            ...id("contacts", "bea"),
            fullName: "Bea Soto",
            phone: "+34600000001",
            email: "bea@example.test",
            country: "ES",
            lists: ["vip"],
            externalId: DEMO_EXTERNAL_IDS.contacts.bea,
          },
          {
            ref: "carlos",
            ...id("contacts", "carlos"),
            fullName: "Carlos Gil",
            phone: "+34600000002",
            email: "carlos@example.test",
            country: "ES",
          },
        ],
        conversations: [
          {
            ref: "c1",
            ...id("conversations", "c1"),
            channel: "wa",
            status: "active",
            assignedTo: "ana",
            identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", contact: "bea" },
            messages: [{ role: "user", content: "Hi! Is the flat still available?", createdAt: day(0) }],
          },
          {
            ref: "c2",
            ...id("conversations", "c2"),
            channel: "site",
            status: "active",
            identity: { externalId: "visitor-1", name: "Carlos", contact: "carlos" },
            messages: [{ role: "user", content: "Can I book a visit?", createdAt: day(-1, 10) }],
          },
        ],
        leads: [
          {
            ref: "l1",
            ...id("leads", "l1"),
            customerName: "Bea Soto",
            customerEmail: "bea@example.test",
            customerPhone: "+34600000001",
            stage: "new",
            contact: "bea",
            conversation: "c1",
            intent: "buy",
            quality: "hot",
            externalId: DEMO_EXTERNAL_IDS.leads.l1,
            createdAt: day(-2, 8),
          },
          {
            ref: "l2",
            ...id("leads", "l2"),
            customerName: "Carlos Gil",
            customerPhone: "+34600000002",
            stage: "qualified",
            contact: "carlos",
            createdAt: day(-1, 9),
          },
        ],
        appointments: [
          {
            ref: "a1",
            ...id("appointments", "a1"),
            assignedTo: "ana",
            title: "Viewing",
            appointmentType: "visit",
            startsAt: day(7, 10),
            endsAt: day(7, 11),
            contact: "bea",
            lead: "l1",
          },
        ],
        tickets: [
          {
            ref: "t1",
            ...id("tickets", "t1"),
            subject: "Broken link in listing",
            status: "open",
            createdBy: "ana",
            assignedTo: "ana",
            contact: "bea",
            externalId: DEMO_EXTERNAL_IDS.tickets.t1,
            comments: [{ author: "ana", body: "Looking into it" }],
          },
        ],
      },
    ],
  };
}
