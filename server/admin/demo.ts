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
 * The line a start logs about the tenants, when there is something to say (issue 28 §3): on a
 * database without any tenant, the next step (the admin CLI's load); on one with the demo tenant,
 * how to get a new key of it (on the embedded database the CLI needs the service stopped: one
 * process per folder). Nothing otherwise (a production database). Two small queries, once per start.
 */
export async function tenantsNotice(db: Database, embedded: boolean): Promise<{ msg: string; tenantId?: string } | undefined> {
  const stop = embedded ? "stop the service (the embedded database allows one process), then run " : "run ";
  if (!(await db.prisma.tenant.findFirst({ select: { id: true } })))
    return { msg: `the ${embedded ? "embedded " : ""}database has no tenant yet: to create tenants, users and API keys, ${stop}${LOAD_COMMAND} (README.md, "Admin CLI")` };
  const demo = await findDemoTenant(db);
  if (!demo) return undefined;
  return { msg: `demo tenant ${demo.tenantId}: for a new API key, ${stop}${DEMO_KEY_COMMAND}`, tenantId: demo.tenantId };
}

export function demoFixture(now = new Date()): FixtureInput {
  const day = (d: number, h = 0) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + d, h)).toISOString();
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
          { ref: "ana", name: "Ana Ruiz", email: DEMO_OWNER_EMAIL, bookable: true, assignable: true, workingHours: weekdays },
          { ref: "luis", name: "Luis Vega", email: "luis@demo.test", bookable: true, assignable: true, workingHours: weekdays },
        ],
        stages: [
          { ref: "new", name: "New", defaultEntry: true },
          { ref: "qualified", name: "Qualified" },
          { ref: "won", name: "Won" },
        ],
        apiKeys: [{ ref: "demo", owner: "ana", scopes: "all" }],
        channels: [
          // A local address where nothing listens: sends are stored with deliveryStatus "failed".
          { ref: "wa", kind: "whatsapp", name: "WhatsApp", config: { baseUrl: "http://127.0.0.1:9", phoneNumberId: "1001", accessToken: "demo" } },
          { ref: "site", kind: "web", name: "Website chat" },
        ],
        templates: [{ ref: "welcome", channel: "wa", name: "welcome", language: "en", body: "Hello {{1}}, this is {{2}}", approved: true }],
        contactLists: [{ ref: "vip", name: "VIP" }],
        contacts: [
          { ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@example.test", country: "ES", lists: ["vip"] },
          { ref: "carlos", fullName: "Carlos Gil", phone: "+34600000002", email: "carlos@example.test", country: "ES" },
        ],
        conversations: [
          {
            ref: "c1", channel: "wa", status: "active", assignedTo: "ana",
            identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", contact: "bea" },
            messages: [{ role: "user", content: "Hi! Is the flat still available?", createdAt: day(0) }],
          },
          { ref: "c2", channel: "site", status: "active", identity: { externalId: "visitor-1", name: "Carlos", contact: "carlos" },
            messages: [{ role: "user", content: "Can I book a visit?", createdAt: day(-1, 10) }] },
        ],
        leads: [
          { ref: "l1", customerName: "Bea Soto", customerEmail: "bea@example.test", customerPhone: "+34600000001", stage: "new",
            contact: "bea", conversation: "c1", intent: "buy", quality: "hot", createdAt: day(-2, 8) },
          { ref: "l2", customerName: "Carlos Gil", customerPhone: "+34600000002", stage: "qualified", contact: "carlos", createdAt: day(-1, 9) },
        ],
        appointments: [
          { ref: "a1", assignedTo: "ana", title: "Viewing", appointmentType: "visit", startsAt: day(7, 10), endsAt: day(7, 11), contact: "bea", lead: "l1" },
        ],
        tickets: [
          { ref: "t1", subject: "Broken link in listing", status: "open", createdBy: "ana", assignedTo: "ana", contact: "bea",
            comments: [{ author: "ana", body: "Looking into it" }] },
        ],
      },
    ],
  };
}
