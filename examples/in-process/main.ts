// The tRPC core called in-process (server/core.ts), as an internal job of this codebase would: no
// HTTP, the same checks and answers as /public/v1. It opens its own database — PGLITE_DATA_DIR (an
// embedded folder no running service holds; `memory://` for a throwaway one) or DATABASE_URL — with
// the demo tenant loaded on an empty embedded folder, as `npm start` does.
//
//   PGLITE_DATA_DIR=memory:// npx tsx examples/in-process/main.ts
//
// With DATABASE_URL, pass a key of that database: CRM_API_KEY=crm_… npx tsx examples/in-process/main.ts
import { TRPCError } from "@trpc/server";
import { CoreError, openCore } from "../../server/core.js";

const core = await openCore({ background: false });
try {
  const key = process.env.CRM_API_KEY ?? core.demoKey;
  if (!key) throw new Error("no key: set CRM_API_KEY (the demo is loaded only on an empty embedded folder)");
  const me = core.as(key);

  const leads = await me.api.leads.list({ limit: 3 });
  console.log(
    `leads: ${leads.total} in all; the newest: ${leads.items.map((l) => l.customerName).join(", ") || "(none)"}`,
  );

  // A create with an Idempotency-Key, then the same call again: the second is the first's answer, replayed.
  const once = me.with({ idempotencyKey: `in-process-example-${Date.now()}` });
  const lead = await once.api.leads.create({
    customerName: "Lucía Ortega",
    customerPhone: "+34 600 123 456",
    intent: "buy",
  });
  console.log(`created lead ${lead.id} (version ${lead.version}), replayed: ${once.outcome.replayed === true}`);
  const again = await once.api.leads.create({
    customerName: "Lucía Ortega",
    customerPhone: "+34 600 123 456",
    intent: "buy",
  });
  console.log(`the same call again: lead ${again.id}, replayed: ${once.outcome.replayed === true}`);

  // A PATCH that names a version the lead no longer has: 412, as REST answers it.
  await me.api.leads.update({ lead_id: lead.id, notes: "called back" });
  try {
    await me.with({ ifMatch: lead.version }).api.leads.update({ lead_id: lead.id, quality: "hot" });
    console.log("unexpected: the stale If-Match was accepted");
  } catch (err) {
    const cause = err instanceof TRPCError && err.cause instanceof CoreError ? err.cause : undefined;
    console.log(`stale If-Match: ${cause?.envelope.error} (HTTP ${cause?.status})`);
  }
} finally {
  await core.close();
}
