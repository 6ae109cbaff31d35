// The typed REST client (client/index.ts: openapi-fetch over types generated from openapi.json),
// end to end against the real app, walking the spec's typical uses (item 7): pull new leads
// incrementally with dateFrom, create a contact from a form (Idempotency-Key), check availability
// then book the first slot, mirror a ticket and its comments, send a message on a web conversation
// and start a WhatsApp template conversation (against the local provider stand-in); mirror the
// tenant with the changes feed (followChanges).
// Every response the client receives is checked against the OpenAPI document, as in app.request().
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createCrmClient,
  CrmError,
  followChanges,
  type Change,
  type CrmClient,
  type Lead,
} from "../../client/index.js";
import { startApp, type TestApp } from "../helpers/app.js";
import { assertConforms } from "../helpers/conformance.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { startProviderStub, type ProviderStub } from "../helpers/provider-stub.js";

// Friday 2026-11-20 12:00 UTC; the tenant is on Europe/Madrid (UTC+1 in November).
const T0 = new Date("2026-11-20T12:00:00.000Z");
const MIN = 60_000;
const H = 60 * MIN;
const at = (ms: number) => new Date(T0.getTime() + ms).toISOString();

let app: TestApp;
let stub: ProviderStub;
let crm: CrmClient;
type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let acme: Ids;

/** The service clock: moves forward one minute before each write so that order is deterministic. */
let clock = T0;
function tick(ms = MIN) {
  clock = new Date(clock.getTime() + ms);
  app.setNow(clock);
}

/** fetch for the client that also checks every response against the OpenAPI document. */
async function conformingFetch(request: Request): Promise<Response> {
  const res = await fetch(request);
  const text = await res.clone().text();
  assertConforms(
    request.method,
    request.url,
    res.status,
    res.headers,
    text ? (JSON.parse(text) as unknown) : undefined,
  );
  return res;
}

/** The success body of a call that must answer `status`. */
function ok<T, E>(r: { data?: T; error?: E; response: Response }, status: number): T {
  if (r.response.status !== status || r.data === undefined)
    throw new Error(`expected ${status}, got ${r.response.status}: ${JSON.stringify(r.error)}`);
  return r.data;
}

beforeAll(async () => {
  app = await startApp();
  stub = await startProviderStub();
  app.setNow(T0);
  const base = tenant("acme");
  const loaded = await app.load(
    fixture(
      tenant("acme", {
        channels: [
          {
            ref: "wa",
            kind: "whatsapp",
            name: "WhatsApp",
            config: { baseUrl: stub.baseUrl, phoneNumberId: "1001", accessToken: "t0k" },
          },
          ...base.channels!.filter((c) => c.ref !== "wa"),
        ],
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@example.test" }],
        leads: [
          { ref: "l1", customerName: "Old One", customerPhone: "+34600000101", createdAt: at(-3 * H) },
          { ref: "l2", customerName: "Old Two", customerPhone: "+34600000102", createdAt: at(-2 * H) },
          { ref: "l3", customerName: "Old Three", customerPhone: "+34600000103", createdAt: at(-1 * H) },
        ],
        conversations: [
          {
            ref: "webchat",
            channel: "site",
            identity: { externalId: "visitor-1", name: "Visitor", phone: null, email: null, contact: "bea" },
            messages: [{ role: "user", content: "Is the flat still available?", createdAt: at(-30 * MIN) }],
          },
        ],
      }),
      tenant("other"),
    ),
  );
  acme = loaded.tenants.acme!;
  crm = createCrmClient(`${app.url}/`, acme.apiKeys.full!.key, { fetch: conformingFetch });
});
afterAll(async () => {
  await app?.close();
  await stub?.close();
});

describe("typed client: the spec's typical uses", () => {
  it("introspects the key", async () => {
    const me = ok(await crm.GET("/public/v1/me"), 200);
    expect(me.tenantId).toBe(acme.id);
    expect(me.scopes).toContain("tenant:leads.read");
    expect(me.rateLimit.perMinute).toBeGreaterThan(0);
  });

  it("pulls new leads incrementally with dateFrom, the list's cursor as the next dateFrom, deduping by id", async () => {
    const seen = new Map<string, Lead>();
    /** One pull: every page from dateFrom on; returns the leads not seen before and the next dateFrom. */
    async function pull(dateFrom: string | undefined): Promise<{ fresh: Lead[]; cursor: string | undefined }> {
      const fresh: Lead[] = [];
      let cursor: string | undefined = dateFrom;
      for (let offset = 0; ; ) {
        const page = ok(await crm.GET("/public/v1/leads", { params: { query: { dateFrom, offset, limit: 2 } } }), 200);
        for (const lead of page.items) {
          if (seen.has(lead.id)) continue;
          seen.set(lead.id, lead);
          fresh.push(lead);
        }
        cursor = page.cursor ?? cursor;
        if (!page.pagination.hasNext) break;
        offset += page.items.length;
      }
      return { fresh, cursor };
    }

    const first = await pull(undefined);
    expect(first.fresh.map((l) => l.customerName).sort()).toEqual(["Old One", "Old Three", "Old Two"]);
    expect(first.cursor).toBe(at(-1 * H));

    // Two leads arrive (one from a web form, retried with the same Idempotency-Key: one lead).
    tick();
    const formLead = ok(
      await crm.POST("/public/v1/leads", {
        params: { header: { "Idempotency-Key": "form-lead-1" } },
        body: {
          customerName: "Eva Mora",
          customerPhone: "+34600000009",
          zones: ["centro"],
          budget: { min: 100000, max: 250000 },
        },
      }),
      201,
    );
    const retried = ok(
      await crm.POST("/public/v1/leads", {
        params: { header: { "Idempotency-Key": "form-lead-1" } },
        body: {
          customerName: "Eva Mora",
          customerPhone: "+34600000009",
          zones: ["centro"],
          budget: { min: 100000, max: 250000 },
        },
      }),
      201,
    );
    expect(retried.id).toBe(formLead.id);
    tick();
    const linked = ok(
      await crm.POST("/public/v1/leads", { body: { customerName: "Bea Soto", customerPhone: "+34 600 000 001" } }),
      201,
    );
    expect(linked.customerId).toBe(acme.contacts.bea);
    expect(linked.source).toBe("api");

    // The next pull from the cursor: the boundary lead comes back (dateFrom is inclusive) and is deduped.
    const second = await pull(first.cursor);
    expect(second.fresh.map((l) => l.id).sort()).toEqual([formLead.id, linked.id].sort());
    expect(second.cursor).toBe(linked.createdAt);

    // Nothing new: an empty pull that keeps the cursor.
    const third = await pull(second.cursor);
    expect(third.fresh).toEqual([]);
    expect(third.cursor).toBe(second.cursor);
    expect(seen.size).toBe(5);
  });

  it("creates a contact from a form with an Idempotency-Key: the same request again gives the same contact", async () => {
    tick();
    const form = { fullName: "Carla Díaz", phone: "611 000 222", email: "carla@example.test", country: "ES" };
    const created = ok(
      await crm.POST("/public/v1/contacts", {
        params: { header: { "Idempotency-Key": "form-contact-7" } },
        body: form,
      }),
      201,
    );
    expect(created).toMatchObject({
      fullName: "Carla Díaz",
      phone: "+34611000222",
      email: "carla@example.test",
      origin: "api",
    });
    const again = ok(
      await crm.POST("/public/v1/contacts", {
        params: { header: { "Idempotency-Key": "form-contact-7" } },
        body: form,
      }),
      201,
    );
    expect(again.id).toBe(created.id);
    // Without the key the same form is a duplicate: the typed error carries the stable code.
    const dup = await crm.POST("/public/v1/contacts", { body: form });
    expect(dup.response.status).toBe(409);
    expect(dup.error?.error).toBe("ALREADY_EXISTS");
    const found = ok(await crm.GET("/public/v1/contacts", { params: { query: { search: "carla@" } } }), 200);
    expect(found.items.map((c) => c.id)).toEqual([created.id]);
  });

  it("checks availability, then books the first slot; the same slot again is APPOINTMENT_OVERLAP", async () => {
    // Monday 2026-11-23: Ana works 09:00–17:00 Madrid = 08:00–16:00 UTC, in 30-minute slots.
    const before = ok(
      await crm.GET("/public/v1/availability", { params: { query: { from: "2026-11-23", to: "2026-11-23" } } }),
      200,
    );
    expect(before.degraded).toBe(false);
    expect(before.slots).toHaveLength(16);
    const slot = before.slots[0]!;
    expect(slot).toEqual({
      startsAt: "2026-11-23T08:00:00.000Z",
      endsAt: "2026-11-23T08:30:00.000Z",
      userId: acme.users.ana,
    });

    tick();
    const booking = {
      assignedUserId: slot.userId,
      startsAt: slot.startsAt,
      endsAt: slot.endsAt,
      title: "Flat viewing",
      appointmentType: "viewing",
      customerId: acme.contacts.bea,
    };
    const appt = ok(await crm.POST("/public/v1/appointments", { body: booking }), 201);
    expect(appt).toMatchObject({
      assignedUserId: acme.users.ana,
      startsAt: slot.startsAt,
      endsAt: slot.endsAt,
      status: "scheduled",
      source: "manual",
    });

    const clash = await crm.POST("/public/v1/appointments", { body: { ...booking, title: "Double booking" } });
    expect(clash.response.status).toBe(409);
    expect(clash.error?.error).toBe("APPOINTMENT_OVERLAP");
    expect(clash.data).toBeUndefined();

    const after = ok(
      await crm.GET("/public/v1/availability", {
        params: { query: { from: "2026-11-23", to: "2026-11-23", userId: acme.users.ana } },
      }),
      200,
    );
    expect(after.slots[0]?.startsAt).toBe("2026-11-23T08:30:00.000Z");
    const listed = ok(
      await crm.GET("/public/v1/appointments", {
        params: { query: { userId: acme.users.ana, from: "2026-11-23T00:00:00Z" } },
      }),
      200,
    );
    expect(listed.items.map((a) => a.id)).toEqual([appt.id]);
  });

  it("mirrors a ticket and its comments", async () => {
    tick();
    const ticket = ok(
      await crm.POST("/public/v1/tickets", {
        params: { header: { "Idempotency-Key": "helpdesk-4711" } },
        body: { customerId: acme.contacts.bea, subject: "Heating broken", comment: "Reported by phone" },
      }),
      201,
    );
    expect(ticket.status).toBe("open");
    expect(ticket.comments.map((c) => c.body)).toEqual(["Reported by phone"]);

    tick();
    const updated = ok(
      await crm.POST("/public/v1/tickets/{ticket_id}/comments", {
        params: { path: { ticket_id: ticket.id } },
        body: { body: "Technician booked" },
      }),
      201,
    );
    expect(updated.comments.map((c) => c.body)).toEqual(["Reported by phone", "Technician booked"]);

    const list = ok(await crm.GET("/public/v1/tickets", { params: { query: { customerId: acme.contacts.bea } } }), 200);
    const mirrored = list.items.find((t) => t.id === ticket.id);
    expect(mirrored?.subject).toBe("Heating broken");
    expect(mirrored?.comments.map((c) => [c.body, c.authorUserId])).toEqual([
      ["Reported by phone", acme.users.ana],
      ["Technician booked", acme.users.ana],
    ]);

    tick();
    const resolved = ok(
      await crm.PATCH("/public/v1/tickets/{ticket_id}", {
        params: { path: { ticket_id: ticket.id } },
        body: { status: "resolved" },
      }),
      200,
    );
    expect(resolved.status).toBe("resolved");
  });

  it("sends a message on a web conversation", async () => {
    tick();
    const conversationId = acme.conversations.webchat!;
    const msg = ok(
      await crm.POST("/public/v1/conversations/{id}/messages", {
        params: { path: { id: conversationId } },
        body: { content: "Yes, it is. Shall we book a viewing?" },
      }),
      201,
    );
    expect(msg).toMatchObject({ conversationId, role: "operator", content: "Yes, it is. Shall we book a viewing?" });
    expect(msg.deliveryStatus).not.toBe("failed");
    const page = ok(
      await crm.GET("/public/v1/conversations/{id}/messages", {
        params: { path: { id: conversationId }, query: { limit: 50 } },
      }),
      200,
    );
    expect(page.items.map((m) => m.content)).toEqual([
      "Yes, it is. Shall we book a viewing?",
      "Is the flat still available?",
    ]);
    expect(stub.requests).toHaveLength(0);
  });

  it("starts a WhatsApp template conversation against the provider", async () => {
    tick();
    stub.reset();
    const body = {
      channelId: acme.channels.wa!,
      phone: "+34 611 333 444",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Eva", "Ana"],
    };
    const conversation = ok(
      await crm.POST("/public/v1/conversations/start", {
        params: { header: { "Idempotency-Key": "automation-run-99" } },
        body,
      }),
      201,
    );
    expect(conversation).toMatchObject({
      channel: "whatsapp",
      channelId: acme.channels.wa,
      assignedOperatorId: acme.users.ana,
      lastMessagePreview: "Hello Eva, this is Ana",
    });
    expect(conversation.customer.phone).toBe("+34611333444");
    expect(stub.requests).toHaveLength(1);
    expect(stub.requests[0]!.body).toMatchObject({
      to: "34611333444",
      type: "template",
      template: { name: "welcome", language: { code: "en" } },
    });

    // An automation retry with the same key: the same conversation, no second template sent.
    const retried = ok(
      await crm.POST("/public/v1/conversations/start", {
        params: { header: { "Idempotency-Key": "automation-run-99" } },
        body,
      }),
      201,
    );
    expect(retried.id).toBe(conversation.id);
    expect(stub.requests).toHaveLength(1);

    const list = ok(await crm.GET("/public/v1/conversations", { params: { query: { channel: "whatsapp" } } }), 200);
    expect(list.items.map((c) => c.id)).toContain(conversation.id);
  });

  it("mirrors the tenant with the changes feed: bootstrap, follow, and restart when the token expires", async () => {
    const mirror = new Map<string, Change["data"]>();
    const apply = (items: Change[]) => {
      for (const c of items) {
        if (c.action === "delete") mirror.delete(`${c.type}:${c.id}`);
        else mirror.set(`${c.type}:${c.id}`, c.data);
      }
    };
    const follow = async (since?: string) => {
      for await (const page of followChanges(crm, { since, limit: 3 })) {
        apply(page.items);
        since = page.nextSince;
      }
      return since!;
    };
    /** What the resources' own lists say now (each list is small here: one page). */
    const fresh = async () => {
      const m = new Map<string, unknown>();
      const put = (type: string, items: { id: string }[]) => {
        for (const o of items) m.set(`${type}:${o.id}`, o);
      };
      put("lead", ok(await crm.GET("/public/v1/leads", { params: { query: { limit: 200 } } }), 200).items);
      put("contact", ok(await crm.GET("/public/v1/contacts", { params: { query: { limit: 200 } } }), 200).items);
      put(
        "conversation",
        ok(await crm.GET("/public/v1/conversations", { params: { query: { limit: 200 } } }), 200).items,
      );
      put(
        "appointment",
        ok(await crm.GET("/public/v1/appointments", { params: { query: { limit: 200 } } }), 200).items,
      );
      put("ticket", ok(await crm.GET("/public/v1/tickets", { params: { query: { limit: 200 } } }), 200).items);
      return m;
    };

    let since = await follow();
    expect(new Map([...mirror].sort())).toEqual(new Map([...(await fresh())].sort()));

    tick();
    const lead = ok(await crm.GET("/public/v1/leads", { params: { query: { limit: 1 } } }), 200).items[0]!;
    ok(
      await crm.PATCH("/public/v1/leads/{lead_id}", {
        params: { path: { lead_id: lead.id } },
        body: { notes: "mirrored" },
      }),
      200,
    );
    ok(
      await crm.POST("/public/v1/conversations/{id}/messages", {
        params: { path: { id: acme.conversations.webchat! } },
        body: { content: "Mirror me" },
      }),
      201,
    );
    since = await follow(since);
    expect((mirror.get(`lead:${lead.id}`) as Lead).notes).toBe("mirrored");
    expect(new Map([...mirror].sort())).toEqual(new Map([...(await fresh())].sort()));

    // 31 days later the token is refused with a "restart from the beginning" code.
    app.setNow(new Date(clock.getTime() + 31 * 24 * H));
    try {
      await expect(follow(since)).rejects.toSatisfy(
        (e: unknown) => e instanceof CrmError && e.status === 422 && e.sinceExpired,
      );
      mirror.clear();
      await follow();
      expect(new Map([...mirror].sort())).toEqual(new Map([...(await fresh())].sort()));
    } finally {
      app.setNow(clock);
    }
  });

  it("errors are typed envelopes: a wrong key gives INVALID_CREDENTIALS", async () => {
    const stranger = createCrmClient(app.url, "crm_not_a_real_key", { fetch: conformingFetch });
    const r = await stranger.GET("/public/v1/leads");
    expect(r.response.status).toBe(401);
    expect(r.error?.error).toBe("INVALID_CREDENTIALS");
    expect(r.error?.request_id).toBe(r.response.headers.get("x-request-id"));
  });
});
