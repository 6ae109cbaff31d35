// The scenarios of issue 8. Each one yields request after request (rotating over ids and search
// terms, fresh Idempotency-Keys, never-overlapping appointment slots), used alike by autocannon and
// by the sequential round-trip count.
import type { Dataset } from "./dataset.js";

export interface Req {
  method: "GET" | "POST";
  path: string;
  body?: string;
  idempotencyKey?: string;
}

export interface Scenario {
  name: string;
  title: string;
  /** Also run against the raw baseline (same request). */
  baseline: boolean;
  /** Writes rows (run after the reads so that they see the loaded dataset). */
  write: boolean;
  next(): Req;
}

const day = (d: Date) => d.toISOString().slice(0, 10);
const P = "/public/v1";

export interface Prepared {
  /** nextCursor of the first message page of each conversation used. */
  messageCursors: Map<string, string>;
}

export function buildScenarios(ds: Dataset, prep: Prepared, runId: string): Scenario[] {
  const big = ds.big;
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
  const terms = ["moreno", "lucia", "garcia", "600 012", "martina.1", "Ruiz", "zzz-nobody", "Santos"];
  // Appointment slots far beyond the loaded ones (those end ~250 days after the anchor): slot k of
  // user u starts 600 days + k × 30 minutes after the anchor's midnight — never two alike.
  // (A reused database keeps earlier runs' slots: each run starts 10 days per minute of the clock later.)
  const runDays = 600 + (Math.floor(Date.now() / 60_000) % 20_000) * 10;
  const slotBase = Date.UTC(ds.anchor.getUTCFullYear(), ds.anchor.getUTCMonth(), ds.anchor.getUTCDate()) + runDays * 86400_000;
  let slot = 0;
  let lead = 0;

  const scenarios: Scenario[] = [
    { name: "me", title: "GET /me", baseline: true, write: false, next: () => ({ method: "GET", path: `${P}/me` }) },
    { name: "leads", title: "GET /leads?limit=50", baseline: true, write: false, next: () => ({ method: "GET", path: `${P}/leads?limit=50` }) },
    {
      name: "leads-since",
      title: "GET /leads?dateFrom=(24 h ago)&limit=50",
      baseline: false,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?dateFrom=${encodeURIComponent(since)}&limit=50` }),
    },
    {
      name: "leads-deep",
      title: "GET /leads?offset=50000&limit=50",
      baseline: false,
      write: false,
      next: () => ({ method: "GET", path: `${P}/leads?offset=50000&limit=50` }),
    },
    {
      name: "contacts-search",
      title: "GET /contacts?search=(8 rotating terms)",
      baseline: false,
      write: false,
      next: () => ({ method: "GET", path: `${P}/contacts?search=${encodeURIComponent(rot(terms))}` }),
    },
    {
      name: "messages",
      title: "GET /conversations/{id}/messages?limit=50",
      baseline: false,
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
        return { method: "GET", path: `${P}/conversations/${c}/messages?limit=50&cursor=${prep.messageCursors.get(c)}` };
      },
    },
    {
      name: "availability",
      title: "GET /availability (7 days, one user)",
      baseline: false,
      write: false,
      next: () => ({ method: "GET", path: `${P}/availability?from=${day(from)}&to=${day(to)}&userId=${rot(users)}` }),
    },
    { name: "tickets", title: "GET /tickets?limit=50", baseline: false, write: false, next: () => ({ method: "GET", path: `${P}/tickets?limit=50` }) },
    {
      name: "post-leads",
      title: "POST /leads (fresh Idempotency-Key)",
      baseline: true,
      write: true,
      next: () => {
        const i = lead++;
        // Half match a loaded contact by phone (one lookup), half match nobody (phone, then email).
        const contact = (i * 7919) % big.size.contacts;
        const digits = i % 2 === 0 ? `6${String(contact).padStart(8, "0")}` : `699${String(i % 1_000_000).padStart(6, "0")}`;
        const phone = `${digits.slice(0, 3)} ${digits.slice(3, 6)} ${digits.slice(6)}`;
        return {
          method: "POST",
          path: `${P}/leads`,
          idempotencyKey: `bench-${runId}-lead-${i}`,
          body: JSON.stringify({ customerName: `Bench Lead ${i}`, customerPhone: phone, customerEmail: `bench${i}@nobody.example`, intent: "buy" }),
        };
      },
    },
    {
      name: "post-appointments",
      title: "POST /appointments (non-overlapping slots)",
      baseline: false,
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
  ];
  return scenarios;
}
