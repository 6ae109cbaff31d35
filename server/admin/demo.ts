// The demo tenant loaded by the first `npm start` on an empty embedded database.
import type { FixtureInput } from "./fixture.js";

export function demoFixture(now = new Date()): FixtureInput {
  const day = (d: number, h = 0) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + d, h)).toISOString();
  const weekdays = [1, 2, 3, 4, 5].map((weekday) => ({ weekday, start: "09:00", end: "17:00" }));
  return {
    tenants: [
      {
        ref: "demo",
        name: "Demo Realty",
        plan: "pro",
        timezone: "Europe/Madrid",
        defaultCountry: "ES",
        slotMinutes: 30,
        users: [
          { ref: "ana", name: "Ana Ruiz", email: "ana@demo.test", bookable: true, assignable: true, workingHours: weekdays },
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
