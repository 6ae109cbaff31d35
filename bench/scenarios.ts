// The benchmark's scenarios (the upserts, put-contacts, post-contacts and batch-upsert-contacts, run
// last with the other writes). Each one yields request after request
// (rotating over ids and search terms, fresh Idempotency-Keys, never-overlapping appointment slots),
// used alike by autocannon and by the sequential round-trip count. buildScenarios() makes them for
// one tenant: the matrix tenant (every scenario, service against baseline) and each sized tenant
// (the `growth` ones: the lists, whose cost per request must not grow with the tenant).
import { availabilityWorstCase, type BenchTenant, type Dataset } from "./dataset.js";

export interface Req {
  method: "GET" | "POST" | "PUT";
  path: string;
  body?: string;
  idempotencyKey?: string;
}

export interface Scenario {
  name: string;
  title: string;
  /** Also run against the raw baseline (same request). */
  baseline: boolean;
  /** A list: also measured on every sized tenant (growth table), and against the baseline without its count. */
  growth?: boolean;
  /** Writes rows (run after the reads so that they see the loaded dataset). */
  write: boolean;
  /** API key to send (default: the large tenant's). */
  key?: string;
  /**
   * Objects written per request (a batch: 100). Its throughput is reported as items per second
   * (req/s × items), and `batchOf` names the one-object scenario it must beat at 1 connection.
   */
  items?: number;
  /** Items/s at 1 connection ≥ `factor` × the req/s of the scenario `single`, both in the same run. */
  batchOf?: { single: string; factor: number };
  /**
   * The objects one answer created and the ones it did not (a batch answers 200 with a status per
   * item): counted over every answer of a run (autocannon's onResponse), so that a run whose items
   * failed inside 200 answers cannot pass.
   */
  tally?(status: number, body: string): { created: number; failed: number };
  /** The service's CPU ms per request at 1 connection ≤ `factor` × that of the scenario `scenario` (same run). */
  cpuOf?: { scenario: string; factor: number };
  /** The connection counts it runs at (default: every one of the matrix): a 4 MiB answer runs at 1. */
  connections?: number[];
  next(): Req;
}

const day = (d: Date) => d.toISOString().slice(0, 10);
const P = "/public/v1";

export interface Prepared {
  /** nextCursor of the first message page of each conversation used. */
  messageCursors: Map<string, string>;
  /**
   * Changes feed tokens of the large tenant: at its head (a caught-up poll), and spread over its feed (500-item pages).
   */
  changes: { caughtUp: string; pages: string[] };
  /** Ids of contacts of the tenant that have leads. */
  leadContacts: string[];
  /**
   * Live contacts given an external id by prepare() (the update
   * path of PUT /contacts/by-external-id), with their stored phone.
   */
  externalContacts: { externalId: string; phone: string }[];
  /**
   * 100 tickets of one contact with long threads and external ids
   * (prepare(): the batch over long threads and its list page).
   */
  longTickets: { contactId: string; items: { externalId: string; subject: string }[] };
  /** nextCursor of leads pages half-way down the list (default order): a keyset page deep in it. */
  leadCursors: string[];
}

export function buildScenarios(ds: Dataset, big: BenchTenant, prep: Prepared, runId: string): Scenario[] {
  const convs = big.conversationIds.slice(0, 100);
  const withCursor = convs.filter((c) => prep.messageCursors.has(c));
  if (withCursor.length === 0) throw new Error("no message cursors prepared");
  const users = big.userIds;
  let n = 0;
  const seq = () => n++;
  const rot = <T>(xs: T[]) => xs[seq() % xs.length]!;

  const since = new Date(ds.anchor.getTime() - 24 * 3600_000).toISOString();
  const from = new Date(ds.anchor.getTime() + 24 * 3600_000);
  const to = new Date(from.getTime() + 6 * 24 * 3600_000);
  // The availability worst-case tenant is booked from the day after the anchor: ask from that day on.
  const availFrom = new Date(ds.anchor.getTime() + 24 * 3600_000);
  const availTo = new Date(availFrom.getTime() + (availabilityWorstCase.days - 1) * 24 * 3600_000);
  // Contacts that have leads (every third lead links contact (i mod contacts)).
  const leadContacts = prep.leadContacts.length ? prep.leadContacts : [big.userIds[0]!];
  const terms = ["moreno", "lucia", "garcia", "600 012", "martina.1", "Ruiz", "zzz-nobody", "Santos"];
  // Appointment slots far beyond the loaded ones (those end ~250 days after the anchor): slot k of
  // user u starts 600 days + k × 30 minutes after the anchor's midnight — never two alike.
  // (A reused database keeps earlier runs' slots: each run starts 10 days per minute of the clock later.)
  const runDays = 600 + (Math.floor(Date.now() / 60_000) % 20_000) * 10;
  const slotBase =
    Date.UTC(ds.anchor.getUTCFullYear(), ds.anchor.getUTCMonth(), ds.anchor.getUTCDate()) + runDays * 86400_000;
  let slot = 0;
  let lead = 0;
  // The contacts that hold an external id (PUT's update path), and the new contacts'
  // numbering. The clock tag (minutes) keeps a reused database's next run off this run's values.
  const externals = prep.externalContacts;
  if (externals.length === 0) throw new Error("no contacts with an external id prepared");
  const tag = Math.floor(Date.now() / 60_000);
  const BATCH = 100;
  let put = 0;
  let created = 0;
  let batched = 0;
  // New contact j of series s ("c" single creates, "b" batch items): phone +34 7 and 8 digits, a
  // million per series and run (the tag modulo 50 picks the block), external id and email from the tag.
  const newContact = (j: number, s: "c" | "b" = "c") => {
    const n = (tag % 50) * 2_000_000 + (s === "b" ? 1_000_000 : 0) + (j % 1_000_000);
    return {
      externalId: `bench-${tag}-${s}${j}`,
      fullName: `Bench Contact ${s}${j}`,
      phone: `+347${String(n).padStart(8, "0")}`,
      email: `bench.${tag}.${s}${j}@nobody.example`,
    };
  };

  const scenarios: Scenario[] = [
    { name: "me", title: "GET /me", baseline: true, write: false, next: () => ({ method: "GET", path: `${P}/me` }) },
    {
      name: "leads",
      title: "GET /leads?limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?limit=50` }),
    },
    {
      name: "leads-since",
      title: "GET /leads?dateFrom=(24 h ago)&limit=50",
      baseline: false,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?dateFrom=${encodeURIComponent(since)}&limit=50` }),
    },
    {
      // Half-way down the tenant's leads: 5,000 at 10k, 50,000 at 100k, 500,000 at 1M.
      name: "leads-deep",
      title: "GET /leads?offset=(half the leads)&limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?offset=${Math.floor(big.size.leads / 2)}&limit=50` }),
    },
    {
      name: "leads-updated",
      title: "GET /leads?sort=-updatedAt&limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?sort=-updatedAt&limit=50` }),
    },
    {
      name: "leads-updated-since",
      title: "GET /leads?updatedFrom=(24 h ago)&limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?updatedFrom=${encodeURIComponent(since)}&limit=50` }),
    },
    {
      // The keyset page after one half-way down the tenant's leads (prepare()).
      name: "leads-cursor-deep",
      title: "GET /leads?cursor=(half the leads)&limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?limit=50&cursor=${rot(prep.leadCursors)}` }),
    },
    {
      name: "leads-customer",
      title: "GET /leads?customerId=(rotating contacts)&limit=50",
      baseline: false,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?customerId=${rot(leadContacts)}&limit=50` }),
    },
    {
      name: "contacts",
      title: "GET /contacts?limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/contacts?limit=50` }),
    },
    {
      name: "contacts-search",
      title: "GET /contacts?search=(8 rotating terms)",
      baseline: false,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/contacts?search=${encodeURIComponent(rot(terms))}` }),
    },
    {
      name: "messages",
      title: "GET /conversations/{id}/messages?limit=50",
      baseline: false,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/conversations/${rot(convs)}/messages?limit=50` }),
    },
    {
      name: "messages-page2",
      title: "GET /conversations/{id}/messages?limit=50&cursor=(after the newest 25)",
      baseline: false,
      write: false,
      next: () => {
        const c = rot(withCursor);
        return {
          method: "GET",
          path: `${P}/conversations/${c}/messages?limit=50&cursor=${prep.messageCursors.get(c)}`,
        };
      },
    },
    {
      name: "availability",
      title: "GET /availability (7 days, one user)",
      baseline: false,
      write: false,
      next: () => ({ method: "GET", path: `${P}/availability?from=${day(from)}&to=${day(to)}&userId=${rot(users)}` }),
    },
    {
      // The worst case allowed — every bookable user swept over 31 days of 5-minute slots.
      name: "availability-any",
      title:
        `GET /availability (31 days, no userId: ${availabilityWorstCase.users} bookable users × ` +
        `${availabilityWorstCase.appointmentsPerUser} appointments, 5-min slots)`,
      baseline: false,
      write: false,
      key: ds.availability.key,
      next: () => ({ method: "GET", path: `${P}/availability?from=${day(availFrom)}&to=${day(availTo)}` }),
    },
    {
      name: "tickets",
      title: "GET /tickets?limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/tickets?limit=50` }),
    },
    {
      name: "appointments",
      title: "GET /appointments?limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/appointments?limit=50` }),
    },
    {
      name: "conversations",
      title: "GET /conversations?limit=50",
      baseline: true,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/conversations?limit=50` }),
    },
    {
      name: "changes",
      title: "GET /changes?since=(caught up)",
      baseline: false,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/changes?since=${prep.changes.caughtUp}` }),
    },
    {
      name: "changes-page",
      title: "GET /changes?limit=500&since=(50 positions spread over the feed)",
      baseline: false,
      growth: true,
      write: false,
      next: () => ({ method: "GET", path: `${P}/changes?limit=500&since=${rot(prep.changes.pages)}` }),
    },
    {
      // A list page over the 100 long-thread tickets (~45 KB each: 4.5 MB, so the 4 MiB budget cuts
      // it): what the batch below is measured against.
      name: "tickets-long",
      title: "GET /tickets?customerId=(100 tickets of ~45 KB)&limit=100",
      baseline: false,
      write: false,
      connections: [1],
      next: () => ({ method: "GET", path: `${P}/tickets?customerId=${prep.longTickets.contactId}&limit=100` }),
    },
    {
      // The same 100 tickets by external id, every item unchanged: the work is bounded like the list
      // page's (threads read once, for the results sent), so it counts one request against the quotas.
      name: "batch-upsert-tickets-long",
      title: "POST /tickets/batch/upsert (the same 100 tickets, unchanged)",
      baseline: false,
      write: false,
      cpuOf: { scenario: "tickets-long", factor: 2 },
      connections: [1],
      next: () => ({
        method: "POST",
        path: `${P}/tickets/batch/upsert`,
        body: JSON.stringify({
          items: prep.longTickets.items.map((t) => ({ ...t, customerId: prep.longTickets.contactId })),
        }),
      }),
    },
    {
      name: "post-leads",
      title: "POST /leads (fresh Idempotency-Key)",
      baseline: true,
      write: true,
      next: () => {
        const i = lead++;
        // Half match a loaded contact by phone (one lookup), half match nobody (phone, then email).
        const contact = (i * 7919) % big.size.contacts;
        const digits =
          i % 2 === 0 ? `6${String(contact).padStart(8, "0")}` : `699${String(i % 1_000_000).padStart(6, "0")}`;
        const phone = `${digits.slice(0, 3)} ${digits.slice(3, 6)} ${digits.slice(6)}`;
        return {
          method: "POST",
          path: `${P}/leads`,
          idempotencyKey: `bench-${runId}-lead-${i}`,
          body: JSON.stringify({
            customerName: `Bench Lead ${i}`,
            customerPhone: phone,
            customerEmail: `bench${i}@nobody.example`,
            intent: "buy",
          }),
        };
      },
    },
    {
      name: "post-appointments",
      title: "POST /appointments (non-overlapping slots)",
      baseline: true,
      write: true,
      next: () => {
        const k = slot++;
        const startsAt = new Date(slotBase + Math.floor(k / users.length) * 30 * 60_000);
        const endsAt = new Date(startsAt.getTime() + 30 * 60_000);
        return {
          method: "POST",
          path: `${P}/appointments`,
          idempotencyKey: `bench-${runId}-appt-${k}`,
          body: JSON.stringify({
            assignedUserId: users[k % users.length],
            title: `Bench visit ${k}`,
            appointmentType: "visit",
            startsAt: startsAt.toISOString(),
            endsAt: endsAt.toISOString(),
          }),
        };
      },
    },
    // Two-way sync. One clock tag per run (the same on both sides of a Citus run, built
    // back to back; another on a reused database's next run): the PUT's names, the new contacts'
    // external ids, phones (+34 7…: no loaded contact, no POST /leads phone) and emails.
    {
      // The update path: every request changes the fullName of a contact that holds the external id
      // (rotating over prep.externalContacts; the stored phone sent as it is stored), so each one
      // really writes (a new version, a change in the feed). No Idempotency-Key, no If-Match.
      name: "put-contacts",
      title: "PUT /contacts/by-external-id/{id} (update: a new fullName each time)",
      baseline: true,
      write: true,
      next: () => {
        const u = put++;
        const c = externals[u % externals.length]!;
        return {
          method: "PUT",
          path: `${P}/contacts/by-external-id/${encodeURIComponent(c.externalId)}`,
          body: JSON.stringify({ fullName: `Bench Upsert ${tag}-${u}`, phone: c.phone }),
        };
      },
    },
    {
      // The one-object reference of the batch: the same contact body (with its external id), one per request.
      name: "post-contacts",
      title: "POST /contacts (a new contact with an external id)",
      baseline: false,
      write: true,
      tally: (status) => (status === 201 ? { created: 1, failed: 0 } : { created: 0, failed: 1 }),
      next: () => ({ method: "POST", path: `${P}/contacts`, body: JSON.stringify(newContact(created++)) }),
    },
    {
      // Against the service's single creates (the criterion), and the raw
      // baseline's one-statement batch (how far a set-based write goes).
      name: "batch-upsert-contacts",
      title: `POST /contacts/batch/upsert (${BATCH} new contacts per request)`,
      baseline: true,
      write: true,
      items: BATCH,
      batchOf: { single: "post-contacts", factor: 20 },
      tally: (status, body) => {
        if (status !== 200) return { created: 0, failed: BATCH };
        try {
          const n = (JSON.parse(body).results as { status: string }[]).filter((r) => r.status === "created").length;
          return { created: n, failed: BATCH - n };
        } catch {
          return { created: 0, failed: BATCH };
        }
      },
      next: () => {
        // Each item: its externalId first, then the PUT body's fields.
        const items = Array.from({ length: BATCH }, () => newContact(batched++, "b"));
        return { method: "POST", path: `${P}/contacts/batch/upsert`, body: JSON.stringify({ items }) };
      },
    },
  ];
  return scenarios;
}
