// The typed REST client (client/index.ts) walking the integrator's typical uses, runnable as is
// against the demo tenant (README.md, "Typed client"; CI runs it, test/process/examples.test.ts):
//   CRM_URL=$BASE CRM_API_KEY=$KEY npx tsx examples/rest-client.mts
import { createCrmClient, type Lead } from "../client/index.js";

const crm = createCrmClient(process.env.CRM_URL ?? "http://127.0.0.1:3000", process.env.CRM_API_KEY!);

// 1. Pull new leads incrementally: the list's `cursor` is the next `dateFrom` (inclusive: dedupe by id).
const seen = new Set<string>();
let dateFrom: string | undefined; // persist it between runs
for (let offset = 0; ; ) {
  const { data, error } = await crm.GET("/public/v1/leads", { params: { query: { dateFrom, offset, limit: 200 } } });
  if (error) throw new Error(error.error); // the stable code, e.g. "RATE_LIMIT_EXCEEDED"
  const fresh: Lead[] = data.items.filter((l) => !seen.has(l.id));
  for (const l of fresh) seen.add(l.id);
  if (!data.pagination.hasNext) {
    dateFrom = data.cursor ?? dateFrom;
    break;
  }
  offset += data.items.length;
}
console.log(`1. leads: ${seen.size}, next dateFrom ${dateFrom}`);

// 2. A contact from a web form; the Idempotency-Key makes a retry return the same contact.
const contact = await crm.POST("/public/v1/contacts", {
  params: { header: { "Idempotency-Key": "form-7f3a" } },
  body: { fullName: "Carla Díaz", phone: "611 000 222", email: "carla@example.test", country: "ES" },
});
if (contact.error?.error === "ALREADY_EXISTS") {
  /* phone or email already known */
}
console.log(`2. contact: ${contact.response.status} ${contact.data?.phone ?? contact.error?.error}`);

// 3. Check availability next week, then book the first slot (409 APPOINTMENT_OVERLAP if someone was faster).
const monday = new Date();
monday.setUTCDate(monday.getUTCDate() + ((8 - monday.getUTCDay()) % 7 || 7));
const day = (d: number) => new Date(monday.getTime() + d * 86_400_000).toISOString().slice(0, 10);
const { data: avail } = await crm.GET("/public/v1/availability", { params: { query: { from: day(0), to: day(4) } } });
const slot = avail?.slots[0];
if (slot) {
  const booked = await crm.POST("/public/v1/appointments", {
    body: {
      assignedUserId: slot.userId,
      startsAt: slot.startsAt,
      endsAt: slot.endsAt,
      title: "Flat viewing",
      appointmentType: "viewing",
    },
  });
  if (booked.error?.error === "APPOINTMENT_OVERLAP") {
    /* ask for availability again */
  }
  console.log(`3. booked: ${booked.response.status} ${booked.data?.startsAt ?? booked.error?.error}`);
}

// 4. Mirror a helpdesk ticket and its comments.
const { data: ticket } = await crm.POST("/public/v1/tickets", {
  body: { customerId: contact.data?.id, subject: "Heating broken", comment: "Reported by phone" },
});
if (ticket)
  await crm.POST("/public/v1/tickets/{ticket_id}/comments", {
    params: { path: { ticket_id: ticket.id } },
    body: { body: "Technician booked" },
  });
const { data: tickets } = await crm.GET("/public/v1/tickets", { params: { query: { customerId: contact.data?.id } } });
console.log(`4. tickets of the contact: ${tickets?.total}, comments: ${tickets?.items[0]?.comments.length}`);

// 5. Messages from an automation: free text on a conversation (here the demo's website chat), or a
//    WhatsApp template to start one. The demo's WhatsApp channel points at 127.0.0.1:9, where nothing
//    listens: the send answers 201 with the message stored and deliveryStatus "failed".
const { data: web } = await crm.GET("/public/v1/conversations", { params: { query: { channel: "web", limit: 1 } } });
const { data: wa } = await crm.GET("/public/v1/conversations", {
  params: { query: { channel: "whatsapp", limit: 1 } },
});
const chat = web?.items[0];
const whatsapp = wa?.items[0]?.channelId;
if (chat) {
  const sent = await crm.POST("/public/v1/conversations/{id}/messages", {
    params: { path: { id: chat.id } },
    body: { content: "Thanks, we'll call you." },
  });
  console.log(`5. message: ${sent.response.status} ${sent.data?.deliveryStatus ?? sent.error?.error}`);
}
if (whatsapp) {
  const started = await crm.POST("/public/v1/conversations/start", {
    params: { header: { "Idempotency-Key": "run-99" } },
    body: {
      channelId: whatsapp,
      phone: "+34611333444",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Eva", "Ana"],
    },
  });
  const { data: messages } = started.data
    ? await crm.GET("/public/v1/conversations/{id}/messages", { params: { path: { id: started.data.id } } })
    : { data: undefined };
  console.log(`5. template: ${started.response.status} ${messages?.items[0]?.deliveryStatus ?? started.error?.error}`);
}
