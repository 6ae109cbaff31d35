// A daily pipeline digest, the kind of small program an internal team writes against the CRM's
// internal tRPC API: the day's new leads by stage, the day's appointments and the open tickets.
//
//   CRM_URL=http://127.0.0.1:3000 CRM_API_KEY=crm_… npx tsx examples/internal-app/digest.ts [YYYY-MM-DD]
//
// The day is a UTC calendar day (default: today). Types come from client/trpc.d.ts alone (this
// folder's tsconfig.json compiles no file of the service); the calls go through tRPC's default
// link, httpBatchLink: the first page of every list and the caller introspection leave as ONE HTTP
// request (a batch of 4 calls, each counted against the key's quota like a request of its own).
import { createTRPCClient, httpBatchLink, TRPCClientError } from "@trpc/client";
import type { AppOutputs, AppRouter } from "../../client/trpc.js";

type Page<T> = { items: T[]; pagination: { hasNext: boolean } };

/** The service accepts at most 20 calls per batch: httpBatchLink splits larger ones. */
const MAX_BATCH_CALLS = 20;
/** Most items per page (the API's limit), and most pages read per list: a digest, not an export. */
const PAGE = 200;
const MAX_PAGES = 25;

function fail(message: string): never {
  console.error(`digest: ${message}`);
  process.exit(2);
}

const baseUrl = (process.env.CRM_URL ?? "http://127.0.0.1:3000").replace(/\/+$/, "");
const apiKey = process.env.CRM_API_KEY ?? fail("set CRM_API_KEY (a new demo key: npm run --silent admin -- demo-key)");
const day = process.argv[2] ?? new Date().toISOString().slice(0, 10);
if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || Number.isNaN(Date.parse(`${day}T00:00:00Z`)))
  fail(`the day must be YYYY-MM-DD, got "${day}"`);
const from = `${day}T00:00:00.000Z`;
const to = new Date(Date.parse(from) + 86_400_000).toISOString();

const crm = createTRPCClient<AppRouter>({
  links: [httpBatchLink({ url: `${baseUrl}/trpc`, maxItems: MAX_BATCH_CALLS, headers: { "X-API-Key": apiKey } })],
});

/** Every item of an offset list whose first page is already there (later pages one request each). */
async function rest<T>(first: Page<T>, next: (offset: number) => Promise<Page<T>>): Promise<T[]> {
  const items = [...first.items];
  for (let page = 1, last = first; last.pagination.hasNext && page < MAX_PAGES; page++) {
    last = await next(items.length);
    items.push(...last.items);
  }
  return items;
}

const hhmm = (iso: string) => iso.slice(11, 16);

async function main(): Promise<void> {
  // One batch: four calls in one HTTP request (me.get and the lists take no argument or a few).
  const [me, leadsPage, appointmentsPage, ticketsPage] = await Promise.all([
    crm.me.get.query(),
    crm.leads.list.query({ dateFrom: from, dateTo: to, limit: PAGE }),
    crm.appointments.list.query({ from, to, limit: PAGE }),
    crm.tickets.list.query({ status: "open", limit: PAGE }),
  ]);
  const leads = await rest(leadsPage, (offset) =>
    crm.leads.list.query({ dateFrom: from, dateTo: to, limit: PAGE, offset }),
  );
  const appointments: AppOutputs["appointments"]["list"]["items"] = await rest(appointmentsPage, (offset) =>
    crm.appointments.list.query({ from, to, limit: PAGE, offset }),
  );

  const byStage = new Map<string, number>();
  for (const lead of leads) byStage.set(lead.stageId, (byStage.get(lead.stageId) ?? 0) + 1);

  const out: string[] = [`Pipeline digest for ${day} (UTC) — tenant ${me.tenantId}, plan ${me.plan}`, ""];
  out.push(`New leads: ${leadsPage.total}`);
  for (const [stageId, n] of [...byStage].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])))
    out.push(`  stage ${stageId}: ${n}`);
  out.push("", `Appointments: ${appointmentsPage.total}`);
  for (const a of [...appointments].sort((x, y) => x.startsAt.localeCompare(y.startsAt)))
    out.push(`  ${hhmm(a.startsAt)}–${hhmm(a.endsAt)} UTC  ${a.title} (${a.appointmentType}, ${a.status})`);
  out.push("", `Open tickets: ${ticketsPage.total}`);
  for (const t of ticketsPage.items.slice(0, 10))
    out.push(`  ${t.subject} — ${t.comments.length} comment(s), opened ${t.createdAt.slice(0, 10)}`);
  if (ticketsPage.total > 10) out.push(`  … and ${ticketsPage.total - 10} more`);
  console.log(out.join("\n"));
}

main().catch((e: unknown) => {
  if (e instanceof TRPCClientError) {
    // The first reason is in the message; the public error envelope in data.envelope.
    const err = e as TRPCClientError<AppRouter>;
    console.error(
      `digest: ${err.data?.envelope.error ?? "ERROR"} (HTTP ${err.data?.httpStatus ?? "?"}): ${err.message}`,
    );
    process.exit(1);
  }
  throw e;
});
