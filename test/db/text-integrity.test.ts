// Text is stored as sent, or refused: one check (server/body.ts) for every string
// of every body, query and header — a lone UTF-16 surrogate ("\ud800" as a JSON escape), bytes that
// are not UTF-8 (a body's, or a query's percent-encoded "%ED%A0%80") → 422 VALIDATION_ERROR naming
// the field, nothing persisted; never a silent U+FFFD. Over /public/v1 and /trpc.
//
// The fields come from the operations' own zod input schemas (every string leaf of every procedure
// of the app router), so a field or an operation added later is covered without touching this file;
// only a new write operation needs its valid base body in BASES (the test says so).
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import { appRouter } from "../../routers/index.js";
import { expectEnvelope, startApp, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { startProviderStub, type ProviderStub } from "../helpers/provider-stub.js";

/** A lone high surrogate between two letters; JSON.stringify writes it as the escape \ud800. */
const LONE = "x\ud800y";
/** Well-formed astral text: surrogate pairs (and a combining sequence), stored and returned unchanged. */
const ASTRAL = "😀 𝄞 👩🏽‍💻 ok";

type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let app: TestApp;
let stub: ProviderStub;
let acme: Ids;
let key: string;

beforeAll(async () => {
  app = await startApp();
  stub = await startProviderStub();
  const loaded = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: { perMinute: 100_000, perDay: 1_000_000 },
        channels: [
          {
            ref: "wa",
            kind: "whatsapp",
            name: "WhatsApp",
            config: { baseUrl: stub.baseUrl, phoneNumberId: "1001", accessToken: "t0k" },
          },
          { ref: "site", kind: "web", name: "Website chat" },
        ],
        templates: [
          {
            ref: "hello",
            channel: "wa",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}, this is {{2}}",
            approved: true,
          },
        ],
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@example.test" }],
        conversations: [
          {
            ref: "web",
            channel: "site",
            status: "active",
            identity: { externalId: "visitor-1", name: null, phone: null, email: null, contact: "bea" },
          },
        ],
        leads: [{ ref: "l1", customerName: "Bea Soto", contact: "bea" }],
        appointments: [
          {
            ref: "a1",
            assignedTo: "ana",
            title: "Viewing",
            appointmentType: "visit",
            startsAt: "2027-01-04T10:00:00Z",
            endsAt: "2027-01-04T11:00:00Z",
            contact: "bea",
          },
        ],
        tickets: [
          {
            ref: "t1",
            subject: "Broken",
            createdBy: "ana",
            contact: "bea",
            comments: [{ author: "ana", body: "Looking" }],
          },
        ],
      }),
    ),
  );
  acme = loaded.tenants.acme!;
  key = acme.apiKeys.full!.key;
});
afterAll(async () => {
  await app?.close();
  await stub?.close();
});

// ---- the operations, from the router ------------------------------------------------------------

interface Operation {
  /** tRPC path, e.g. "leads.create". */
  proc: string;
  type: "query" | "mutation";
  method: string;
  /** The REST path template, e.g. /public/v1/leads/{lead_id}. */
  path: string;
  pathParams: string[];
  /** Every input field that takes a string (zod path; an array's items as index 0). */
  stringFields: (string | number)[][];
}

/** The input paths of a zod schema that accept a string (string, enum, literal, a union with one). */
function stringLeaves(
  schema: z.ZodType,
  path: (string | number)[] = [],
  out: (string | number)[][] = [],
): (string | number)[][] {
  const def = (schema as any)._zod.def;
  switch (def.type) {
    case "string":
    case "enum":
    case "literal":
    case "template_literal":
      out.push(path);
      break;
    case "optional":
    case "nullable":
    case "default":
    case "prefault":
    case "readonly":
    case "nonoptional":
    case "catch":
      stringLeaves(def.innerType, path, out);
      break;
    case "pipe":
      stringLeaves(def.in, path, out);
      break;
    case "object":
      for (const [k, v] of Object.entries(def.shape)) stringLeaves(v as z.ZodType, [...path, k], out);
      break;
    case "array":
      stringLeaves(def.element, [...path, 0], out);
      break;
    case "union": {
      const found: (string | number)[][] = [];
      for (const o of def.options) stringLeaves(o, path, found);
      out.push(...new Map(found.map((p) => [p.join("."), p])).values());
      break;
    }
    default: // numbers, booleans, transforms of their own: no text
  }
  return out;
}

// The REST operations (every procedure but the changes subscription, whose `input` query parameter
// /trpc checks for every call alike: rest/trpc.ts transportRules).
const OPERATIONS: Operation[] = Object.entries(appRouter._def.procedures as Record<string, any>)
  .filter(([, p]) => p._def.meta?.openapi)
  .map(([proc, p]) => {
    const openapi = p._def.meta?.openapi;
    return {
      proc,
      type: p._def.type,
      method: openapi.method,
      path: openapi.path,
      pathParams: [...String(openapi.path).matchAll(/\{(\w+)\}/g)].map((m) => m[1]!),
      stringFields: (p._def.inputs as z.ZodType[]).flatMap((s) => stringLeaves(s)),
    };
  });
const WRITES = OPERATIONS.filter((o) => o.type === "mutation");
const READS = OPERATIONS.filter((o) => o.type === "query" && o.stringFields.length > 0);

/** A valid input of each write (path parameters included), `n` making unique values unique. */
let counter = 0;
const BASES: Record<string, () => Record<string, unknown>> = {
  "leads.create": () => ({
    customerName: "Lead",
    customerEmail: `lead${++counter}@example.test`,
    customerPhone: "+34 611 000 001",
    intent: "buy",
    quality: "hot",
    stageId: acme.stages.new,
    zones: ["Gracia"],
    assignedOperatorId: acme.users.ana,
    notes: "a note",
  }),
  "leads.update": () => ({ lead_id: acme.leads.l1, quality: "warm", notes: "updated", stageId: acme.stages.won }),
  "contacts.create": () => ({
    fullName: "New Person",
    phone: `+3461200${String(++counter).padStart(4, "0")}`,
    email: `p${counter}@example.test`,
    country: "ES",
  }),
  "contacts.update": () => ({ contact_id: acme.contacts.bea, fullName: "Bea S." }),
  "conversations.start": () => ({
    channelId: acme.channels.wa,
    phone: "+34 611 222 333",
    templateName: "welcome",
    templateLanguage: "en",
    variables: ["Bea", "Ana"],
  }),
  "conversations.messages.send": () => ({ id: acme.conversations.web, content: "hello" }),
  "appointments.create": () => {
    const day = String((++counter % 28) + 1).padStart(2, "0");
    const hour = String(8 + (Math.floor(counter / 28) % 10)).padStart(2, "0");
    return {
      assignedUserId: acme.users.ana,
      title: "Visit",
      appointmentType: "visit",
      startsAt: `2027-03-${day}T${hour}:00:00Z`,
      endsAt: `2027-03-${day}T${hour}:30:00Z`,
      customerId: acme.contacts.bea,
      notes: "n",
    };
  },
  "appointments.update": () => ({ appointment_id: acme.appointments.a1, notes: "moved" }),
  "tickets.create": () => ({ customerId: acme.contacts.bea, subject: "Subject", comment: "first" }),
  "tickets.update": () => ({ ticket_id: acme.tickets.t1, subject: "Subject 2" }),
  "tickets.comment": () => ({ ticket_id: acme.tickets.t1, body: "a comment" }),
  // Upserts: a new external id each time (each is a create); the bodies are otherwise constant, so
  // the same external id upserted again is an unchanged update (200), not a create-only field's 422.
  "leads.upsert": () => leadUpsert(),
  "leads.batchUpsert": () => ({ items: [leadUpsert(), leadUpsert()] }),
  "contacts.upsert": () => contactUpsert(),
  "contacts.batchUpsert": () => ({ items: [contactUpsert(), contactUpsert()] }),
  "tickets.upsert": () => ticketUpsert(),
  "tickets.batchUpsert": () => ({ items: [ticketUpsert(), ticketUpsert()] }),
};
function leadUpsert() {
  return {
    externalId: `ext-lead-${++counter}`,
    customerName: "Lead",
    customerEmail: "upsert@example.test",
    customerPhone: "+34 611 000 001",
    intent: "buy",
    quality: "hot",
    stageId: acme.stages.new,
    zones: ["Gracia"],
    assignedOperatorId: acme.users.ana,
    notes: "a note",
  };
}
function contactUpsert() {
  const n = ++counter;
  return {
    externalId: `ext-contact-${n}`,
    fullName: "Upserted Person",
    phone: `+3461300${String(n).padStart(4, "0")}`,
    email: `u${n}@example.test`,
    country: "ES",
  };
}
function ticketUpsert() {
  return {
    externalId: `ext-ticket-${++counter}`,
    customerId: acme.contacts.bea,
    subject: "Subject",
    assignedTo: acme.users.ana,
  };
}

/**
 * Free-text fields (any character allowed), for the astral round trip: the rest are ids, enums, dates, phones, emails.
 */
const FREE_TEXT: Record<string, string[]> = {
  "leads.create": ["customerName", "intent", "quality", "notes", "zones.0"],
  "leads.update": ["quality", "notes"],
  "contacts.create": ["fullName"],
  "contacts.update": ["fullName"],
  "conversations.start": ["variables.0"],
  "conversations.messages.send": ["content"],
  "appointments.create": ["title", "appointmentType", "notes"],
  "appointments.update": ["notes"],
  "tickets.create": ["subject", "comment"],
  "tickets.update": ["subject"],
  "tickets.comment": ["body"],
  "leads.upsert": ["externalId", "customerName", "intent", "quality", "notes", "zones.0"],
  "contacts.upsert": ["fullName"],
  "tickets.upsert": ["externalId", "subject"],
};

/** A valid query value of each read's string parameter (path parameters included), by operation where they differ. */
const READ_VALUES = (proc = ""): Record<string, string> => ({
  ...readValues(),
  ...(proc === "appointments.list" ? { from: "2027-01-01T00:00:00Z", to: "2027-02-01T00:00:00Z" } : {}),
});
const readValues = (): Record<string, string> => ({
  lead_id: acme.leads.l1!,
  id: acme.conversations.web!,
  search: "bea",
  status: "open",
  channel: "web",
  customerId: acme.contacts.bea!,
  userId: acme.users.ana!,
  assignedTo: acme.users.ana!,
  leadId: acme.leads.l1!,
  listId: crypto.randomUUID(),
  dateFrom: "2026-01-01T00:00:00Z",
  dateTo: "2027-12-31T00:00:00Z",
  from: "2027-01-04",
  to: "2027-01-05",
  offset: "0",
  limit: "5",
  types: "lead",
  contact_id: acme.contacts.bea!,
  ticket_id: acme.tickets.t1!,
  appointment_id: acme.appointments.a1!,
  externalId: "ext-1",
  sort: "-updatedAt",
  updatedFrom: "2026-01-01T00:00:00Z",
  updatedTo: "2027-12-31T00:00:00Z",
});

// ---- helpers ------------------------------------------------------------------------------------

/**
 * The string parameters of a read that a valid request may give together: not `since` and `cursor`
 * (only a previous answer's value is valid), and a list's `id` not beside `externalId` (exclusive).
 */
function wellFormed(op: { stringFields: (string | number)[][]; pathParams: string[] }): string[] {
  const fields = op.stringFields.map(dotted);
  return fields.filter(
    (f) =>
      f !== "since" &&
      f !== "cursor" &&
      !(f === "id" && !op.pathParams.includes("id") && fields.includes("externalId")),
  );
}

const dotted = (path: (string | number)[]) => path.map(String).join(".");

/** A copy of `body` with the value at `path` replaced (an array item: in the array, made if absent). */
function withValue(body: Record<string, unknown>, path: (string | number)[], value: string): Record<string, unknown> {
  const copy = structuredClone(body);
  let at: any = copy;
  for (let i = 0; i < path.length - 1; i++) {
    const k = path[i]!;
    if (typeof path[i + 1] === "number") at[k] = Array.isArray(at[k]) ? at[k] : [];
    else at[k] = at[k] && typeof at[k] === "object" ? at[k] : {};
    at = at[k];
  }
  at[path[path.length - 1]!] = value;
  return copy;
}

const valueAt = (body: any, path: (string | number)[]) => path.reduce((v, k) => v?.[k], body);

/** The REST request of a write: path parameters into the path, the rest as the body. */
function restWrite(op: Operation, input: Record<string, unknown>) {
  let path = op.path;
  const body = { ...input };
  for (const p of op.pathParams) {
    // A lone surrogate cannot be percent-encoded (encodeURIComponent throws): its three UTF-8 bytes are sent.
    const v = String(body[p]);
    path = path.replace(`{${p}}`, v === LONE ? "x%ED%A0%80y" : encodeURIComponent(v));
    delete body[p];
  }
  return { path, body };
}

/** Everything the writes could change, as one digest per table (row text, ordered). */
const TABLES = [
  "Lead",
  "Contact",
  "Customer",
  "ChannelIdentity",
  "Conversation",
  "Message",
  "Appointment",
  "Ticket",
  "TicketComment",
  "IdempotencyRecord",
];
async function snapshot(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const t of TABLES) {
    const rows = await app.db.prisma.$queryRawUnsafe<{ d: string }[]>(
      `SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS d FROM "${t}" t`,
    );
    out[t] = rows[0]!.d;
  }
  return out;
}

/** The envelope of a /trpc error answer (error.data.envelope), checked against the HTTP status and request id. */
function trpcEnvelope(res: Response, status: number, error: string) {
  expect(res.status, res.text).toBe(status);
  const env = res.body?.error?.data?.envelope;
  expect(env, res.text).toBeTruthy();
  expect(env.error).toBe(error);
  expect(Object.keys(env).sort()).toEqual(["details", "error", "message", "request_id"]);
  expect(env.request_id).toBe(res.headers.get("x-request-id"));
  expect(res.body.error.data.httpStatus).toBe(status);
  return env;
}

/** JSON with every character beyond ASCII written as \uXXXX escapes (an astral character as its escaped pair). */
const asciiJson = (v: unknown) =>
  JSON.stringify(v).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

async function trpc(
  method: "GET" | "POST",
  proc: string,
  input: unknown,
  opts: { rawQuery?: string; headers?: Record<string, string>; ascii?: boolean } = {},
): Promise<Response> {
  const query = opts.rawQuery ?? (method === "GET" ? `input=${encodeURIComponent(JSON.stringify(input))}` : "");
  const res = await fetch(`${app.url}/trpc/${proc}${query ? `?${query}` : ""}`, {
    method,
    headers: {
      "X-API-Key": key,
      ...(method === "POST" ? { "Content-Type": "application/json" } : {}),
      ...opts.headers,
    },
    body: method === "POST" ? (opts.ascii ? asciiJson(input) : JSON.stringify(input)) : undefined,
  });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

/** Asserts the 422 of text not stored as sent, naming `field` (with the check's code when `ours`). */
function expectNamed(env: any, field: string, ours = true) {
  const fields = env.details?.fields as { field: string; code: string; message: string }[];
  expect(
    fields.map((f) => f.field),
    JSON.stringify(env),
  ).toContain(field);
  if (ours) expect(fields.find((f) => f.field === field)!.code).toBe("invalid_string");
}

// ---- the tests ----------------------------------------------------------------------------------

describe("the list of operations and fields comes from the router", () => {
  it("every write has a base body, and the schemas yield the known text fields", () => {
    expect(WRITES.length).toBeGreaterThanOrEqual(11);
    for (const op of WRITES)
      expect(BASES[op.proc], `no base input for ${op.proc}: add one to BASES`).toBeTypeOf("function");
    const fields = Object.fromEntries(WRITES.map((o) => [o.proc, o.stringFields.map(dotted)]));
    expect(fields["leads.create"]).toEqual(
      expect.arrayContaining(["customerName", "notes", "zones.0", "customerPhone"]),
    );
    expect(fields["contacts.create"]).toEqual(expect.arrayContaining(["fullName", "phone", "email", "country"]));
    expect(fields["tickets.comment"]).toEqual(expect.arrayContaining(["ticket_id", "body"]));
    for (const [proc, free] of Object.entries(FREE_TEXT)) expect(fields[proc]).toEqual(expect.arrayContaining(free));
  });
});

describe("a lone surrogate in any text field of any write → 422 naming the field, nothing persisted", () => {
  it("over /public/v1 (creates with an Idempotency-Key)", async () => {
    const before = await snapshot();
    let n = 0;
    for (const op of WRITES) {
      for (const field of op.stringFields) {
        const name = dotted(field);
        const { path, body } = restWrite(op, withValue(BASES[op.proc]!(), field, LONE));
        const headers = op.method === "POST" ? { "Idempotency-Key": `ti-rest-${++n}` } : undefined;
        const res = await app.request(op.method, path, { key, body, headers });
        const env = expectEnvelope(res, 422, "VALIDATION_ERROR");
        // A path parameter is refused by its UUID rule (named by zod); a body field by the text check.
        expectNamed(env, name, !op.pathParams.includes(name));
      }
      expect(await snapshot(), `${op.proc} persisted something`).toEqual(before);
    }
  });
  it("over /trpc", async () => {
    const before = await snapshot();
    for (const op of WRITES) {
      for (const field of op.stringFields) {
        const res = await trpc("POST", op.proc, withValue(BASES[op.proc]!(), field, LONE));
        expectNamed(trpcEnvelope(res, 422, "VALIDATION_ERROR"), dotted(field));
      }
      expect(await snapshot(), `${op.proc} persisted something`).toEqual(before);
    }
  });
  it("a lone surrogate in a key, several at once, a low surrogate alone, a reversed pair: each field named", async () => {
    const before = await snapshot();
    const res = await app.request("POST", "/public/v1/leads", {
      key,
      body: { customerName: "a\udc00", notes: "\ude00\ud83d", zones: ["ok", "b\ud800"], "k\ud800": 1 },
    });
    const env = expectEnvelope(res, 422, "VALIDATION_ERROR");
    expect((env.details.fields as { field: string }[]).map((f) => f.field).sort()).toEqual(
      ["customerName", "k\ufffd", "notes", "zones.1"].sort(),
    );
    expect(await snapshot()).toEqual(before);
  });
  it("body bytes that are not UTF-8 (a surrogate's three bytes, a stray 0xFF) → 422 naming the field, on both transports", async () => {
    const before = await snapshot();
    for (const bad of [[0xed, 0xa0, 0x80], [0xff], [0xc3]]) {
      const raw = Buffer.concat([Buffer.from('{"customerName":"a'), Buffer.from(bad), Buffer.from('b"}')]);
      for (const url of [`${app.url}/public/v1/leads`, `${app.url}/trpc/leads.create`]) {
        const r = await fetch(url, {
          method: "POST",
          headers: { "X-API-Key": key, "Content-Type": "application/json" },
          body: new Uint8Array(raw),
        });
        const body: any = await r.json();
        expect(r.status).toBe(422);
        const env = url.includes("/trpc/") ? body.error.data.envelope : body;
        expect(env.error).toBe("VALIDATION_ERROR");
        expectNamed(env, "customerName");
      }
    }
    expect(await snapshot()).toEqual(before);
  });
  it("the check comes after the scope check (401 → 403 plan → 429 → 403 scope → 422)", async () => {
    const none = acme.apiKeys.none!.key;
    expectEnvelope(
      await app.request("POST", "/public/v1/leads", { key: none, body: { customerName: LONE } }),
      403,
      "PERMISSION_DENIED",
    );
    expectEnvelope(
      await app.request("GET", "/public/v1/contacts?search=%ED%A0%80", { key: none }),
      403,
      "PERMISSION_DENIED",
    );
    expectEnvelope(
      await app.request("POST", "/public/v1/leads", { body: { customerName: LONE } }),
      401,
      "INVALID_CREDENTIALS",
    );
  });
});

describe("a lone surrogate in a query parameter → 422 naming it", () => {
  it("over /public/v1: percent-encoded bytes that are not UTF-8, in every string parameter of every read", async () => {
    for (const op of READS) {
      const values = READ_VALUES(op.proc);
      for (const field of op.stringFields) {
        const name = dotted(field);
        let path = op.path;
        for (const p of op.pathParams) path = path.replace(`{${p}}`, p === name ? "x%ED%A0%80y" : values[p]!);
        const query = op.stringFields
          .map(dotted)
          .filter((f) => !op.pathParams.includes(f) && f !== name)
          .map((f) => `${f}=${encodeURIComponent(values[f] ?? "")}`);
        if (!op.pathParams.includes(name)) query.push(`${name}=x%ED%A0%80y`);
        const res = await app.request("GET", `${path}?${query.join("&")}`, { key });
        expectNamed(expectEnvelope(res, 422, "VALIDATION_ERROR"), name, !op.pathParams.includes(name));
      }
    }
  });
  it("over /public/v1: the same parameters well-formed are accepted (the reads' values are valid)", async () => {
    for (const op of READS) {
      const values = READ_VALUES(op.proc);
      let path = op.path;
      for (const p of op.pathParams) path = path.replace(`{${p}}`, values[p]!);
      const query = wellFormed(op)
        .filter((f) => !op.pathParams.includes(f))
        .map((f) => `${f}=${encodeURIComponent(values[f] ?? "")}`);
      const res = await app.request("GET", `${path}?${query.join("&")}`, { key });
      expect(res.status, `${op.proc}: ${res.text}`).toBe(200);
    }
  });
  it("over /public/v1: every parameter, read or not; a malformed escape stays text; valid UTF-8 escapes are fine", async () => {
    expectNamed(
      expectEnvelope(await app.request("GET", "/public/v1/leads?unknown=%ED%A0%80", { key }), 422, "VALIDATION_ERROR"),
      "unknown",
    );
    expectNamed(
      expectEnvelope(await app.request("GET", "/public/v1/contacts?search=a%FFb", { key }), 422, "VALIDATION_ERROR"),
      "search",
    );
    expectNamed(
      expectEnvelope(await app.request("GET", "/public/v1/contacts?search=%C3", { key }), 422, "VALIDATION_ERROR"),
      "search",
    );
    expect((await app.request("GET", "/public/v1/contacts?search=%zz%", { key })).status).toBe(200);
    const found = await app.request("GET", "/public/v1/contacts?search=B%C3%A9a%20S%F0%9F%98%80x", { key });
    expect(found.status).toBe(200);
  });
  it("over /trpc: a lone surrogate in any string of a query's input, and percent-encoded bytes that are not UTF-8", async () => {
    for (const op of READS) {
      const values = READ_VALUES(op.proc);
      const valid = Object.fromEntries(wellFormed(op).map((f) => [f, values[f]]));
      for (const field of op.stringFields) {
        const res = await trpc("GET", op.proc, { ...valid, [dotted(field)]: LONE });
        expectNamed(trpcEnvelope(res, 422, "VALIDATION_ERROR"), dotted(field));
      }
      const ok = await trpc("GET", op.proc, valid);
      expect(ok.status, `${op.proc}: ${ok.text}`).toBe(200);
    }
    const bytes = await trpc("GET", "contacts.list", undefined, {
      rawQuery: "input=%7B%22search%22%3A%22%ED%A0%80%22%7D",
    });
    expectNamed(trpcEnvelope(bytes, 422, "VALIDATION_ERROR"), "input");
  });

  it("over /trpc: the checks read the input tRPC reads, after 1,000 other parameters too (Express's parser stops there); two inputs are 422", async () => {
    const input = encodeURIComponent(JSON.stringify({ search: LONE }));
    const padding = Array.from({ length: 1000 }, (_, i) => `a${i}=x`).join("&");
    const padded = await trpc("GET", "contacts.list", undefined, { rawQuery: `${padding}&input=${input}` });
    expectNamed(trpcEnvelope(padded, 422, "VALIDATION_ERROR"), "search");
    const deep = encodeURIComponent(
      JSON.stringify({ search: "x", nested: JSON.parse("[".repeat(40) + "]".repeat(40)) }),
    );
    const tooDeep = trpcEnvelope(
      await trpc("GET", "contacts.list", undefined, { rawQuery: `${padding}&input=${deep}` }),
      422,
      "VALIDATION_ERROR",
    );
    expect(tooDeep.details.fields.map((f: { code: string }) => f.code)).toContain("too_deep");
    const nul = encodeURIComponent(JSON.stringify({ search: "a\u0000b" }));
    expectNamed(
      trpcEnvelope(
        await trpc("GET", "contacts.list", undefined, { rawQuery: `${padding}&input=${nul}` }),
        422,
        "VALIDATION_ERROR",
      ),
      "search",
    );
    const ok = encodeURIComponent(JSON.stringify({ search: "ok" }));
    const twice = await trpc("GET", "contacts.list", undefined, { rawQuery: `input=${ok}&input=${input}` });
    expectNamed(trpcEnvelope(twice, 422, "VALIDATION_ERROR"), "input", false);
    expect((await trpc("GET", "contacts.list", undefined, { rawQuery: `${padding}&input=${ok}` })).status).toBe(200);
  });
});

/** A request with header bytes as given (node writes a header string's code units ≤ U+00FF as single bytes). */
function rawHeaderRequest(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${app.url}${path}`,
      { method, headers: { "X-API-Key": key, "Content-Type": "application/json", ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") h.set(k, v);
          resolve({ status: res.statusCode!, headers: h, body: JSON.parse(text), text });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("headers the service stores or echoes", () => {
  // A surrogate's three UTF-8 bytes, sent as they are (node reads header bytes as latin1).
  const SURROGATE_BYTES = "k\u00ed\u00a0\u0080";
  it("Idempotency-Key with a surrogate's bytes → 422 naming Idempotency-Key, nothing persisted, on both transports", async () => {
    const before = await snapshot();
    const rest = await rawHeaderRequest(
      "POST",
      "/public/v1/leads",
      { "Idempotency-Key": SURROGATE_BYTES },
      JSON.stringify({ customerName: "x" }),
    );
    expectNamed(expectEnvelope(rest, 422, "VALIDATION_ERROR"), "Idempotency-Key", false);
    const viaTrpc = await rawHeaderRequest(
      "POST",
      "/trpc/leads.create",
      { "Idempotency-Key": SURROGATE_BYTES },
      JSON.stringify({ customerName: "x" }),
    );
    expectNamed(trpcEnvelope(viaTrpc, 422, "VALIDATION_ERROR"), "Idempotency-Key", false);
    expect(await snapshot()).toEqual(before);
  });
  it("X-Request-Id with a surrogate's bytes is not echoed (a new id is)", async () => {
    const res = await rawHeaderRequest("GET", "/public/v1/nothing", { "X-Request-Id": SURROGATE_BYTES }, "");
    expect(res.status).toBe(404);
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.body.request_id).toBe(res.headers.get("x-request-id"));
  });
});

describe("well-formed text outside the BMP is stored and returned unchanged", () => {
  // Each write's free-text fields with astral characters (surrogate pairs in UTF-16, 4 bytes in UTF-8):
  // the answer holds them as sent, and so does the database (read back with a query of its own).
  const COLUMN: Record<string, { table: string; id: (body: any) => string; column: (field: string) => string }> = {
    leads: { table: "Lead", id: (b) => b.id, column: (f) => f.split(".")[0]! },
    contacts: { table: "Contact", id: (b) => b.id, column: (f) => f },
    appointments: { table: "Appointment", id: (b) => b.id, column: (f) => f },
    tickets: { table: "Ticket", id: (b) => b.id, column: (f) => f },
  };
  it("over /public/v1 and /trpc", async () => {
    const before = await snapshot();
    for (const op of WRITES) {
      for (const field of FREE_TEXT[op.proc] ?? []) {
        const path = field.split(".").map((p) => (/^\d+$/.test(p) ? Number(p) : p));
        const { path: url, body } = restWrite(op, withValue(BASES[op.proc]!(), path, ASTRAL));
        const headers = op.method === "POST" ? { "Idempotency-Key": `ti-astral-${op.proc}-${field}` } : undefined;
        const res = await app.request(op.method, url, { key, body, headers });
        expect(res.status, `${op.proc} ${field}: ${res.text}`).toBeLessThan(300);
        // Over /trpc written as escapes: the surrogate pairs arrive as \ud83d\ude00, the check's own path.
        const viaTrpc = await trpc("POST", op.proc, withValue(BASES[op.proc]!(), path, ASTRAL), { ascii: true });
        expect(viaTrpc.status, `${op.proc} ${field} over /trpc: ${viaTrpc.text}`).toBe(200);
        // Where the field shows in the answer, it is exactly what was sent.
        const answered =
          op.proc === "tickets.create" && field === "comment"
            ? res.body.comments?.[0]?.body
            : op.proc === "tickets.comment"
              ? res.body.comments?.at(-1)?.body
              : op.proc === "conversations.start"
                ? undefined
                : valueAt(res.body, path);
        if (answered !== undefined) expect(answered, `${op.proc} ${field}`).toBe(ASTRAL);
        const stored = COLUMN[op.proc.split(".")[0]!];
        if (stored && !(op.proc === "tickets.create" && field === "comment") && op.proc !== "tickets.comment") {
          const rows = await app.db.prisma.$queryRawUnsafe<{ v: unknown }[]>(
            `SELECT "${stored.column(field)}" AS v FROM "${stored.table}" WHERE "id" = $1::uuid`,
            stored.id(res.body),
          );
          const v = rows[0]!.v;
          expect(Array.isArray(v) ? v[0] : v, `${op.proc} ${field} as stored`).toBe(ASTRAL);
        }
      }
    }
    // The message sent and the comment added, as stored.
    const msg = await app.db.prisma.message.findFirst({
      where: { conversationId: acme.conversations.web, content: ASTRAL },
    });
    expect(msg?.content).toBe(ASTRAL);
    const comment = await app.db.prisma.ticketComment.findFirst({ where: { ticketId: acme.tickets.t1, body: ASTRAL } });
    expect(comment?.body).toBe(ASTRAL);
    // The snapshot the refusals are compared with sees every table these writes touched.
    const after = await snapshot();
    for (const t of TABLES.filter((t) => t !== "ChannelIdentity" && t !== "Customer"))
      expect(after[t], t).not.toBe(before[t]);
  });
  it("a surrogate pair written as escapes is one character, accepted", async () => {
    const res = await app.request("POST", "/public/v1/leads", {
      key,
      raw: '{"customerName":"\\ud83d\\ude00 escaped"}',
      headers: { "Content-Type": "application/json" },
    });
    expect(res.status).toBe(201);
    expect(res.body.customerName).toBe("😀 escaped");
    const lead = await app.db.prisma.lead.findFirst({ where: { id: res.body.id } });
    expect(lead?.customerName).toBe("😀 escaped");
  });
});
