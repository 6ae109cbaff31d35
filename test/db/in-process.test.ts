// The core in-process (server/core.ts) answers what REST answers: a sample of every operation, each
// sent over /public/v1 and through the in-process caller with the same input, on twin objects of one
// tenant — the same body (ids, instants and the feed's token masked), the outcome against the status
// (an upsert's created ↔ 201, updated/unchanged ↔ 200; replayed ↔ Idempotent-Replayed), and each
// failure's code and HTTP status against the REST envelope. Every operation of the router must have
// a sample here (a new one fails the coverage check until it has).
import { TRPCError } from "@trpc/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { CoreError, openCore, type CallOptions, type Core } from "../../server/core.js";
import { appRouter } from "../../routers/index.js";
import { operations, type Meta } from "../../routers/trpc.js";
import { startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let core: Core;
let ids: LoadResult;
const BIG = { perMinute: 1_000_000, perDay: 10_000_000 };
const acme = () => ids.tenants.acme!;
const metaOf = new Map(operations(appRouter).map((o) => [o.path, o.meta]));

beforeAll(async () => {
  app = await startApp();
  core = await openCore({ services: app.services });
  const twins = (ref: string) => [`${ref}A`, `${ref}B`];
  ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: BIG,
        contacts: twins("c").map((ref, i) => ({
          ref,
          fullName: "Twin",
          phone: `+3460000000${i + 1}`,
          externalId: `ext-${ref}`,
        })),
        leads: twins("l").map((ref) => ({ ref, customerName: "Twin lead", externalId: `ext-${ref}` })),
        tickets: twins("t").map((ref, i) => ({
          ref,
          subject: "Twin",
          createdBy: "ana",
          contact: `c${"AB"[i]}`,
          externalId: `ext-${ref}`,
          comments: [{ author: "ana", body: "hi" }],
        })),
        appointments: twins("a").map((ref, i) => ({
          ref,
          assignedTo: "ana",
          title: "Twin",
          appointmentType: "visit",
          startsAt: `2030-01-0${i + 7}T10:00:00Z`,
          endsAt: `2030-01-0${i + 7}T10:30:00Z`,
        })),
        conversations: twins("v").map((ref) => ({
          ref,
          channel: "site",
          identity: { externalId: `web-${ref}`, name: "Visitor" },
          messages: [{ role: "user" as const, content: "hello" }],
        })),
      }),
    ),
  );
}, 120_000);
afterAll(async () => {
  await core?.close();
  await app?.close();
});

type Input = Record<string, unknown>;
interface Sample {
  op: string;
  /** The input for twin A (REST) and twin B (in-process); one input for both when the same. */
  input: Input | [Input, Input];
  key?: "full" | "none";
  opts?: CallOptions;
}

/** A UUID, an instant, or a changes-feed token: what differs between two twins' answers by nature. */
// `usage`: each twin counts its own requests (GET /me).
const VOLATILE_KEYS = new Set(["request_id", "nextSince", "usage"]);
function masked(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(masked);
  if (v && typeof v === "object")
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, VOLATILE_KEYS.has(k) ? "<volatile>" : masked(x)]));
  if (typeof v === "string") {
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v)) return "<uuid>";
    if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(v)) return "<instant>";
  }
  return v;
}

/** The strings that differ between the twins' inputs at the same place (B's → A's): twin B's answer says them where A's says A's. */
function differing(a: unknown, b: unknown, out = new Map<string, string>()): Map<string, string> {
  if (typeof a === "string" && typeof b === "string" && a !== b) out.set(b, a);
  else if (a && b && typeof a === "object" && typeof b === "object")
    for (const k of Object.keys(a))
      differing((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], out);
  return out;
}
function renamed(v: unknown, names: Map<string, string>): unknown {
  if (Array.isArray(v)) return v.map((x) => renamed(x, names));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, renamed(x, names)]));
  return typeof v === "string" ? (names.get(v) ?? v) : v;
}

/** The REST request a tRPC input makes: path parameters in the path, the rest as query (GET) or body. */
function restRequest(
  meta: Meta,
  input: Input,
): { method: string; path: string; query?: Record<string, string>; body?: unknown } {
  const o = meta.openapi!;
  const rest = { ...input };
  const path = o.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = rest[name];
    delete rest[name];
    return encodeURIComponent(String(v));
  });
  if (o.method === "GET")
    return { method: o.method, path, query: Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, String(v)])) };
  return { method: o.method, path, body: rest };
}

interface Answer {
  status: number;
  body: unknown;
  replayed: boolean;
}

async function overRest(s: Sample, input: Input): Promise<Answer> {
  const r = restRequest(metaOf.get(s.op)!, input);
  const headers: Record<string, string> = {};
  if (s.opts?.idempotencyKey) headers["Idempotency-Key"] = s.opts.idempotencyKey;
  if (s.opts?.ifMatch !== undefined)
    headers["If-Match"] =
      s.opts.ifMatch === "*"
        ? "*"
        : [s.opts.ifMatch]
            .flat()
            .map((v) => `"${v}"`)
            .join(", ");
  const res = await app.request(r.method, r.path, {
    key: acme().apiKeys[s.key ?? "full"]!.key,
    query: r.query,
    body: r.body,
    headers,
  });
  return { status: res.status, body: res.body, replayed: res.headers.get("idempotent-replayed") === "true" };
}

async function inProcess(s: Sample, input: Input): Promise<Answer> {
  const call = core.as(acme().apiKeys[s.key ?? "full"]!.key).with(s.opts ?? {});
  let target: unknown = call.api;
  for (const seg of s.op.split(".")) target = (target as Record<string, unknown>)[seg];
  const meta = metaOf.get(s.op)!;
  try {
    const body = await (target as (i: Input) => Promise<unknown>)(input);
    const o = call.outcome;
    const status = o.upserted ? (o.upserted === "created" ? 201 : 200) : (meta.successStatus ?? 200);
    return { status, body, replayed: o.replayed === true };
  } catch (err) {
    expect(err).toBeInstanceOf(TRPCError);
    const cause = (err as TRPCError).cause;
    expect(cause).toBeInstanceOf(CoreError);
    const e = cause as CoreError;
    return { status: e.status, body: e.envelope, replayed: false };
  }
}

const twin = (ref: "contacts" | "leads" | "tickets" | "appointments" | "conversations", name: string, i: 0 | 1) =>
  (acme() as unknown as Record<string, Record<string, string>>)[ref]![`${name}${"AB"[i]}`]!;
const both = (make: (i: 0 | 1) => Input): [Input, Input] => [make(0), make(1)];

/** The operations REST also answers (a subscription has no REST twin: test/db/changes-subscribe.test.ts). */
const restOperations = () => operations(appRouter).filter((o) => o.meta.openapi);

function samples(): Sample[] {
  const contact = (i: 0 | 1) => twin("contacts", "c", i);
  const lead = (i: 0 | 1) => twin("leads", "l", i);
  const ticket = (i: 0 | 1) => twin("tickets", "t", i);
  const appt = (i: 0 | 1) => twin("appointments", "a", i);
  const conv = (i: 0 | 1) => twin("conversations", "v", i);
  const user = acme().users.ana!;
  return [
    { op: "me.get", input: {} },
    { op: "leads.list", input: { limit: 5 } },
    { op: "leads.list", input: { limit: 0 } },
    { op: "leads.get", input: both((i) => ({ lead_id: lead(i) })) },
    { op: "leads.get", input: { lead_id: "00000000-0000-4000-8000-000000000000" } },
    { op: "leads.create", input: { customerName: "New", notes: "n" } },
    { op: "leads.create", input: { customerName: "" } },
    { op: "leads.update", input: both((i) => ({ lead_id: lead(i), notes: "patched" })) },
    { op: "leads.update", input: both((i) => ({ lead_id: lead(i), notes: "stale" })), opts: { ifMatch: 99 } },
    { op: "leads.upsert", input: both((i) => ({ externalId: `new-l${i}`, customerName: "Up" })) },
    {
      op: "leads.upsert",
      input: both((i) => ({ externalId: `ext-l${"AB"[i]}`, customerName: "Twin lead", notes: "via put" })),
    },
    {
      op: "leads.batchUpsert",
      input: both((i) => ({
        items: [{ externalId: `ext-l${"AB"[i]}`, customerName: "Twin lead" }, { externalId: "x" }],
      })),
    },
    { op: "contacts.list", input: { limit: 5 } },
    { op: "contacts.get", input: both((i) => ({ contact_id: contact(i) })) },
    { op: "contacts.create", input: both((i) => ({ phone: `+3461111111${i}`, fullName: "C" })) },
    { op: "contacts.create", input: { phone: "not a phone" } },
    { op: "contacts.update", input: both((i) => ({ contact_id: contact(i), fullName: "Renamed" })) },
    {
      op: "contacts.upsert",
      input: both((i) => ({ externalId: `ext-c${"AB"[i]}`, phone: `+3460000000${i + 1}`, fullName: "Again" })),
    },
    {
      op: "contacts.batchUpsert",
      input: both((i) => ({ items: [{ externalId: `bc-${i}`, phone: `+3462222222${i}` }] })),
    },
    { op: "conversations.list", input: { limit: 5 } },
    { op: "conversations.get", input: both((i) => ({ id: conv(i) })) },
    {
      op: "conversations.start",
      input: {
        channelId: acme().channels.site!,
        phone: "+34600000001",
        templateName: "welcome",
        templateLanguage: "en",
      },
    },
    { op: "conversations.messages.list", input: both((i) => ({ id: conv(i), limit: 5 })) },
    { op: "conversations.messages.send", input: both((i) => ({ id: conv(i), content: "hello back" })) },
    { op: "appointments.list", input: { limit: 5 } },
    { op: "appointments.get", input: both((i) => ({ appointment_id: appt(i) })) },
    {
      op: "appointments.create",
      input: both((i) => ({
        assignedUserId: user,
        title: "T",
        appointmentType: "visit",
        startsAt: `2030-02-0${i + 3}T09:00:00Z`,
        endsAt: `2030-02-0${i + 3}T09:30:00Z`,
      })),
    },
    { op: "appointments.update", input: both((i) => ({ appointment_id: appt(i), title: "Moved" })) },
    { op: "availability.get", input: { from: "2030-03-04", to: "2030-03-05", userId: user } },
    { op: "tickets.list", input: { limit: 5, status: "open" } },
    { op: "tickets.get", input: both((i) => ({ ticket_id: ticket(i) })) },
    { op: "tickets.create", input: both((i) => ({ subject: "S", customerId: contact(i), comment: "first" })) },
    { op: "tickets.update", input: both((i) => ({ ticket_id: ticket(i), status: "pending" })) },
    {
      op: "tickets.upsert",
      input: both((i) => ({ externalId: `ext-t${"AB"[i]}`, subject: "Twin", customerId: contact(i) })),
    },
    {
      op: "tickets.batchUpsert",
      input: both((i) => ({
        items: [{ externalId: `ext-t${"AB"[i]}`, subject: "Twin", customerId: contact(i), ifMatch: 1 }],
      })),
    },
    { op: "tickets.comment", input: both((i) => ({ ticket_id: ticket(i), body: "a comment" })) },
    { op: "changes.list", input: { limit: 3, types: "lead" } },
    { op: "stages.list", input: { limit: 1, offset: 1 } },
    { op: "users.list", input: {} },
    { op: "channels.list", input: { limit: 201 } },
    { op: "templates.list", input: { channelId: acme().channels.wa! } },
    // A key without scopes: each operation's refusal (403), /me aside.
    ...restOperations().map((o): Sample => ({ op: o.path, input: {}, key: "none" })),
  ];
}

describe("REST and the in-process caller answer alike", () => {
  it("every operation has a sample here", () => {
    const covered = new Set(
      samples()
        .filter((s) => s.key !== "none")
        .map((s) => s.op),
    );
    expect(
      restOperations()
        .map((o) => o.path)
        .filter((p) => !covered.has(p)),
    ).toEqual([]);
  });

  it("the same body, status and failure for a sample of every operation", async () => {
    for (const s of samples()) {
      const [a, b] = Array.isArray(s.input) ? s.input : [s.input, s.input];
      const rest = await overRest(s, a);
      const local = await inProcess(s, b);
      const what = `${s.op} ${JSON.stringify(a).slice(0, 120)}${s.key === "none" ? " (no scopes)" : ""}`;
      expect({ status: local.status, replayed: local.replayed }, what).toEqual({
        status: rest.status,
        replayed: rest.replayed,
      });
      // Twin B's own names said as twin A's (one request for both: nothing to rename).
      const twins = new Map(["c", "l", "t"].map((r) => [`ext-${r}B`, `ext-${r}A`]))
        .set("web-vB", "web-vA")
        .set("+34600000002", "+34600000001");
      const names = Array.isArray(s.input) ? differing(a, b, twins) : new Map<string, string>();
      expect(masked(renamed(local.body, names)), what).toEqual(masked(rest.body));
    }
  }, 120_000);

  it("an Idempotency-Key: the first call created (201), the same key again is replayed in both, within one namespace", async () => {
    const key = `cmp-keyed-${Date.now()}`;
    const s: Sample = {
      op: "contacts.create",
      input: { phone: "+34633333331", fullName: "Keyed" },
      opts: { idempotencyKey: key },
    };
    const first = await overRest(s, s.input as Input);
    expect(first).toMatchObject({ status: 201, replayed: false });
    // The same key through the core replays REST's answer (one namespace per key and operation).
    const again = await inProcess(s, s.input as Input);
    expect(again).toMatchObject({ status: 201, replayed: true });
    expect(again.body).toEqual(first.body);
    const put = {
      op: "leads.upsert",
      input: { externalId: `keyed-put-${Date.now()}`, customerName: "P" },
      opts: { idempotencyKey: `${key}-put` },
    };
    const created = await inProcess(put, put.input);
    expect(created).toMatchObject({ status: 201, replayed: false });
    expect(await overRest(put, put.input)).toMatchObject({ status: 201, replayed: true, body: created.body });
  });
});
