// The tenant's reference data over HTTP: GET /stages, /users, /channels and /templates. For each list:
// its items (exactly the public fields, never a secret) in its documented order with ties broken by
// id, the offset envelope and its totals, paging, another tenant's rows never listed, the scopes
// (403 PERMISSION_DENIED without them; /users with any one read scope), 401 without a key, a
// malformed limit or offset → 422, the quota counted per request, and the page byte budget cutting a
// page of huge names like any other list. Templates: approved only, the channelId filter, and
// `variables` counted exactly as POST /conversations/start counts them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TenantIds } from "../../server/admin/fixture.js";
import { highestPlaceholder } from "../../routers/conversations/start.js";
import { Prisma } from "../../generated/prisma/client.js";
import {
  channelSize,
  ITEMS_BUDGET_BYTES,
  PAGE_BUDGET_BYTES,
  stageSize,
  templateSize,
  userSize,
  type ItemSize,
} from "../../routers/_lib/page-budget.js";
import { expectEnvelope, randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const STAGES = "/public/v1/stages";
const USERS = "/public/v1/users";
const CHANNELS = "/public/v1/channels";
const TEMPLATES = "/public/v1/templates";
const LISTS = [STAGES, USERS, CHANNELS, TEMPLATES];

const READ_SCOPES = ["leads", "contacts", "conversations", "appointments", "tickets"].map((r) => `tenant:${r}.read`);
const MANAGE_SCOPES = ["leads", "contacts", "conversations", "appointments", "tickets"].map(
  (r) => `tenant:${r}.manage`,
);

/** A tenant with its reference data; `tag` makes its names its own (another tenant's must never show). */
function data(ref: string, tag: string) {
  return tenant(ref, {
    // Many requests per file: lift the per-minute quota (the quota's own rules have their tests).
    rateLimit: { perMinute: 100_000, perDay: 1_000_000 },
    users: [
      { ref: "ana", name: `Ana Ruiz${tag}`, email: `ana@${ref}.test`, bookable: true, assignable: true },
      { ref: "bob", name: `Bob Lee${tag}`, email: `bob@${ref}.test`, bookable: false, assignable: false },
      // Code point order: "Z" < "a" < "Á"; and a second "Ana Ruiz" (a tie, broken by id).
      { ref: "carla", name: `carla${tag}`, email: `carla@${ref}.test`, bookable: true, assignable: false },
      { ref: "alvaro", name: `Álvaro${tag}`, email: `alvaro@${ref}.test`, bookable: false, assignable: true },
      { ref: "zed", name: `Zed${tag}`, email: `zed@${ref}.test` },
      { ref: "ana2", name: `Ana Ruiz${tag}`, email: `ana2@${ref}.test` },
    ],
    stages: [
      { ref: "new", name: `New${tag}`, defaultEntry: true },
      { ref: "qualified", name: `Qualified${tag}` },
      { ref: "won", name: `Won${tag}` },
      { ref: "lost", name: `Lost${tag}` },
    ],
    apiKeys: [
      { ref: "full", owner: "ana", scopes: "all" },
      { ref: "none", owner: "ana", scopes: [] },
      { ref: "leads", owner: "ana", scopes: ["tenant:leads.read"] },
      { ref: "conversations", owner: "ana", scopes: ["tenant:conversations.read"] },
      { ref: "tickets", owner: "ana", scopes: ["tenant:tickets.read"] },
      { ref: "contacts", owner: "ana", scopes: ["tenant:contacts.read"] },
      { ref: "appointments", owner: "ana", scopes: ["tenant:appointments.read"] },
      { ref: "manage", owner: "ana", scopes: MANAGE_SCOPES },
    ],
    channels: [
      {
        ref: "wa",
        kind: "whatsapp",
        name: `WhatsApp${tag}`,
        config: { baseUrl: "http://127.0.0.1:9", phoneNumberId: "1001", accessToken: `secret-token${tag}` },
      },
      { ref: "site", kind: "web", name: `Website chat${tag}` },
      { ref: "tg", kind: "telegram", name: `Telegram${tag}`, connected: false, config: { token: `tg-secret${tag}` } },
      { ref: "ig", kind: "instagram", name: `Instagram${tag}` },
    ],
    templates: [
      { ref: "w-en", channel: "wa", name: `welcome${tag}`, language: "en", body: "Hello {{1}}, this is {{2}}" },
      { ref: "w-es", channel: "wa", name: `welcome${tag}`, language: "es", body: "Hola {{ 1 }}" },
      { ref: "r-en", channel: "wa", name: `reminder${tag}`, language: "en", body: "See you tomorrow" },
      { ref: "w-tg", channel: "tg", name: `welcome${tag}`, language: "en", body: "Hi {{3}}" },
      { ref: "draft", channel: "wa", name: `draft${tag}`, language: "en", body: "{{1}}", approved: false },
    ],
  });
}

let app: TestApp;
let acme: TenantIds;
let globex: TenantIds;
let big: TenantIds;

const get = (path: string, key: string | null, query?: Record<string, string | number>) =>
  app.request("GET", path, { key, query });
const full = () => acme.apiKeys.full!.key;

/** UTF-8 byte order is code point order: the order the lists document for text. */
const byCodePoint = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
const byId = (a: { id: string }, b: { id: string }) => byCodePoint(a.id, b.id);

beforeAll(async () => {
  app = await startApp();
  const loaded = await app.load(fixture(data("acme", ""), data("globex", " (globex)"), data("big", "")));
  acme = loaded.tenants.acme!;
  globex = loaded.tenants.globex!;
  big = loaded.tenants.big!;
  // Two stages at one position (a pipeline edited elsewhere): the tie is broken by id.
  await app.db.sql.query(
    `UPDATE "PipelineStage" SET "position" = 2 WHERE "tenantId" = $1::uuid AND "id" IN ($2::uuid, $3::uuid)`,
    [acme.id, acme.stages.won, acme.stages.lost],
  );
}, 120_000);
afterAll(() => app?.close());

/** The offset envelope's pagination for a page of `returned` items. */
const pagination = (total: number, offset: number, limit: number, returned: number) => ({
  page: Math.floor(offset / limit) + 1,
  pageSize: limit,
  totalItems: total,
  totalPages: Math.ceil(total / limit),
  hasNext: offset + returned < total,
  hasPrev: offset > 0,
});

/** The whole list (one page: every fixture list is under 50 items), its envelope checked. */
async function all(path: string, key = full(), query: Record<string, string> = {}) {
  const r = await get(path, key, query);
  expect(r.status, r.text).toBe(200);
  expect(Object.keys(r.body).sort()).toEqual(["items", "pagination", "total"]);
  expect(r.body.total).toBe(r.body.items.length);
  expect(r.body.pagination).toEqual(pagination(r.body.total, 0, 50, r.body.items.length));
  return r.body.items as any[];
}

describe("GET /stages", () => {
  it("the pipeline in order (position, then id), the default-entry stage marked, the public fields", async () => {
    const items = await all(STAGES);
    const s = acme.stages;
    const tied = [
      { id: s.won!, name: "Won", position: 2, defaultEntry: false },
      { id: s.lost!, name: "Lost", position: 2, defaultEntry: false },
    ].sort(byId);
    expect(items).toEqual([
      { id: s.new, name: "New", position: 0, defaultEntry: true },
      { id: s.qualified, name: "Qualified", position: 1, defaultEntry: false },
      ...tied,
    ]);
    for (const item of items) expect(Object.keys(item)).toEqual(["id", "name", "position", "defaultEntry"]);
  });

  it("the stage a lead created without stageId enters is the one marked defaultEntry", async () => {
    const entry = (await all(STAGES)).find((x) => x.defaultEntry);
    const lead = await app.request("POST", "/public/v1/leads", { key: full(), body: { customerName: "Eva Mora" } });
    expect(lead.status, lead.text).toBe(201);
    expect(lead.body.stageId).toBe(entry.id);
  });
});

describe("GET /users", () => {
  it("by name in code point order, then id; bookable and assignable; no e-mail", async () => {
    const items = await all(USERS);
    const u = acme.users;
    const expected = [
      { id: u.ana!, name: "Ana Ruiz", bookable: true, assignable: true },
      { id: u.ana2!, name: "Ana Ruiz", bookable: true, assignable: true },
      { id: u.bob!, name: "Bob Lee", bookable: false, assignable: false },
      { id: u.zed!, name: "Zed", bookable: true, assignable: true },
      { id: u.carla!, name: "carla", bookable: true, assignable: false },
      { id: u.alvaro!, name: "Álvaro", bookable: false, assignable: true },
    ].sort((a, b) => byCodePoint(a.name, b.name) || byId(a, b));
    expect(expected.map((x) => x.name)).toEqual(["Ana Ruiz", "Ana Ruiz", "Bob Lee", "Zed", "carla", "Álvaro"]);
    expect(items).toEqual(expected);
    for (const item of items) expect(Object.keys(item)).toEqual(["id", "name", "bookable", "assignable"]);
  });
});

describe("GET /channels", () => {
  it("by name, then id; kind, connected, the window on WhatsApp only; never the provider settings", async () => {
    const r = await get(CHANNELS, full());
    expect(r.status).toBe(200);
    const c = acme.channels;
    expect(r.body.items).toEqual([
      { id: c.ig, kind: "instagram", name: "Instagram", connected: true, sessionWindow: false },
      { id: c.tg, kind: "telegram", name: "Telegram", connected: false, sessionWindow: false },
      { id: c.site, kind: "web", name: "Website chat", connected: true, sessionWindow: false },
      { id: c.wa, kind: "whatsapp", name: "WhatsApp", connected: true, sessionWindow: true },
    ]);
    expect(r.body.total).toBe(4);
    expect(r.text).not.toMatch(/secret|config|127\.0\.0\.1/);
  });

  it("sessionWindow is the rule a send applies: 409 on WhatsApp without a window, 201 on the web chat", async () => {
    const ids = await app.load(
      fixture(
        tenant("window", {
          conversations: [
            { ref: "wa", channel: "wa", identity: { externalId: "34600000001", name: "Bea" } },
            { ref: "web", channel: "site", identity: { externalId: "visitor-1", name: "Carlos" } },
          ],
        }),
      ),
    );
    const w = ids.tenants.window!;
    const key = w.apiKeys.full!.key;
    const channels = (await get(CHANNELS, key)).body.items as { id: string; sessionWindow: boolean }[];
    const send = (conversation: string) =>
      app.request("POST", `/public/v1/conversations/${conversation}/messages`, { key, body: { content: "Hi" } });
    expect(channels.find((ch) => ch.id === w.channels.wa)!.sessionWindow).toBe(true);
    expectEnvelope(await send(w.conversations.wa!), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
    expect(channels.find((ch) => ch.id === w.channels.site)!.sessionWindow).toBe(false);
    expect((await send(w.conversations.web!)).status).toBe(201);
  });
});

describe("GET /templates", () => {
  it("the approved templates by name, language, channelId, id; variables = the highest {{n}}; no body", async () => {
    const items = await all(TEMPLATES);
    const c = acme.channels;
    const t = acme.templates;
    expect(items).toEqual([
      { id: t["r-en"], channelId: c.wa, name: "reminder", language: "en", variables: 0 },
      ...[
        { id: t["w-en"]!, channelId: c.wa!, name: "welcome", language: "en", variables: 2 },
        { id: t["w-tg"]!, channelId: c.tg!, name: "welcome", language: "en", variables: 3 },
      ].sort((a, b) => byCodePoint(a.channelId, b.channelId)),
      { id: t["w-es"], channelId: c.wa, name: "welcome", language: "es", variables: 1 },
    ]);
    for (const item of items) expect(Object.keys(item)).toEqual(["id", "channelId", "name", "language", "variables"]);
    // The unapproved one is not listed; no body shows.
    expect(items.map((x) => x.id)).not.toContain(t.draft);
    expect(JSON.stringify(items)).not.toMatch(/Hello|Hola|tomorrow/);
  });

  it("channelId: that channel's templates; unknown or another tenant's matches nothing; malformed is 422", async () => {
    const tg = await all(TEMPLATES, full(), { channelId: acme.channels.tg! });
    expect(tg.map((x) => x.id)).toEqual([acme.templates["w-tg"]]);
    const wa = await all(TEMPLATES, full(), { channelId: acme.channels.wa!.toUpperCase() });
    expect(wa.map((x) => x.name)).toEqual(["reminder", "welcome", "welcome"]);
    for (const channelId of [globex.channels.wa!, randomUuid()]) {
      const r = await get(TEMPLATES, full(), { channelId });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ items: [], total: 0, pagination: pagination(0, 0, 50, 0) });
    }
    const bad = expectEnvelope(await get(TEMPLATES, full(), { channelId: "not-a-uuid" }), 422, "VALIDATION_ERROR");
    expect(bad.details.fields.map((f: { field: string }) => f.field)).toEqual(["channelId"]);
  });

  it("variables counts as POST /conversations/start does, on bodies of every shape", async () => {
    const bodies = [
      "",
      "no placeholders",
      "{{1}}",
      "{{ 2 }} and {{1}}",
      "{{01}} {{007}}",
      "{{0}}",
      "{{1}",
      "{ {3} }",
      "{{-4}}",
      "{{1.5}}",
      "{{x}} {{ 12 }}",
      // JavaScript's \s: tab, line feed, vertical tab, form feed, carriage return, no-break space, ogham,
      // en quad to hair space, line and paragraph separators, narrow no-break space, math space,
      // ideographic space, BOM.
      "{{\t\n\u000b\f\r 5\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff}}",
      // Not \s for JavaScript: zero width space, next line, mongolian vowel separator.
      "{{\u200b6}} {{\u00857}} {{\u180e8}}",
      // Not \d for JavaScript: Arabic-Indic and full-width digits.
      "{{\u0669}} {{\uff19}}",
      "{{2147483647}}",
      "{{000000000000000000009}}",
      "{{{{9}}}}",
      "émoji 😀 {{10}}",
    ];
    const channel = acme.channels.site!;
    const names: string[] = [];
    for (const [i, body] of bodies.entries()) {
      const name = `edge-${String(i).padStart(2, "0")}`;
      names.push(name);
      await app.db.sql.query(
        `INSERT INTO "MessageTemplate" ("tenantId", "channelId", "name", "language", "body", "approved")
         VALUES ($1::uuid, $2::uuid, $3, 'en', $4, true)`,
        [acme.id, channel, name, body],
      );
    }
    try {
      const items = (await all(TEMPLATES, full(), { channelId: channel })) as { name: string; variables: number }[];
      expect(items.map((x) => x.name)).toEqual(names);
      expect(items.map((x) => x.variables)).toEqual(bodies.map(highestPlaceholder));
      // The cases meant to count do count (the comparison above is not between two zeros).
      expect(items.map((x) => x.variables).filter((v) => v > 0).length).toBeGreaterThan(8);
    } finally {
      await app.db.sql.query(`DELETE FROM "MessageTemplate" WHERE "tenantId" = $1::uuid AND "channelId" = $2::uuid`, [
        acme.id,
        channel,
      ]);
    }
  });

  it("a placeholder past the integer range counts as 2147483647 (no start can send that many variables)", async () => {
    await app.db.sql.query(
      `INSERT INTO "MessageTemplate" ("tenantId", "channelId", "name", "language", "body", "approved")
       VALUES ($1::uuid, $2::uuid, 'huge', 'en', $3, true)`,
      [acme.id, acme.channels.site, `{{2147483648}} {{${"9".repeat(400)}}}`],
    );
    try {
      const items = await all(TEMPLATES, full(), { channelId: acme.channels.site! });
      expect(items.map((x) => x.variables)).toEqual([2147483647]);
    } finally {
      await app.db.sql.query(`DELETE FROM "MessageTemplate" WHERE "tenantId" = $1::uuid AND "name" = 'huge'`, [
        acme.id,
      ]);
    }
  });
});

describe("every reference list", () => {
  it("lists only the caller's tenant: the other tenant's rows never appear, its own lists are its own", async () => {
    const own = (t: TenantIds): Record<string, string[]> => ({
      [STAGES]: Object.values(t.stages),
      [USERS]: Object.values(t.users),
      [CHANNELS]: Object.values(t.channels),
      [TEMPLATES]: Object.entries(t.templates)
        .filter(([ref]) => ref !== "draft")
        .map(([, id]) => id),
    });
    for (const [mine, other] of [
      [acme, globex],
      [globex, acme],
    ] as const)
      for (const path of LISTS) {
        const items = await all(path, mine.apiKeys.full!.key);
        expect(items.map((x) => x.id).sort(), `${path} of ${mine.id}`).toEqual([...own(mine)[path]!].sort());
        const text = JSON.stringify(items);
        for (const id of own(other)[path]!) expect(text).not.toContain(id);
        // Globex's names are tagged; acme's never are, globex's always.
        expect(items.every((x) => x.name.endsWith(" (globex)"))).toBe(mine === globex);
      }
  });

  it("pages with offset and limit: the same order, each page's envelope, an offset past the end is empty", async () => {
    for (const path of LISTS) {
      const whole = await all(path);
      const total = whole.length;
      expect(total, path).toBeGreaterThanOrEqual(4);
      const seen: string[] = [];
      for (let offset = 0; offset < total; offset += 3) {
        const r = await get(path, full(), { offset, limit: 3 });
        expect(r.status).toBe(200);
        expect(r.body.total).toBe(total);
        expect(r.body.items).toEqual(whole.slice(offset, offset + 3));
        expect(r.body.pagination).toEqual(pagination(total, offset, 3, r.body.items.length));
        seen.push(...r.body.items.map((x: { id: string }) => x.id));
      }
      expect(seen).toEqual(whole.map((x) => x.id));
      const second = await get(path, full(), { offset: 1, limit: 1 });
      expect(second.body.items).toEqual([whole[1]]);
      expect(second.body.pagination).toEqual({
        page: 2,
        pageSize: 1,
        totalItems: total,
        totalPages: total,
        hasNext: true,
        hasPrev: true,
      });
      const past = await get(path, full(), { offset: total + 5, limit: 200 });
      expect(past.status).toBe(200);
      expect(past.body).toEqual({ items: [], total, pagination: pagination(total, total + 5, 200, 0) });
    }
  });

  it("a malformed, out-of-range or fractional limit or offset is 422 VALIDATION_ERROR naming it", async () => {
    const bad: Record<string, string>[] = [
      { limit: "0" },
      { limit: "201" },
      { limit: "abc" },
      { limit: "1.5" },
      { limit: "-1" },
      { offset: "-1" },
      { offset: "x" },
    ];
    for (const path of LISTS)
      for (const query of bad) {
        const body = expectEnvelope(await get(path, full(), query), 422, "VALIDATION_ERROR");
        expect(
          body.details.fields.map((f: { field: string }) => f.field),
          `${path} ${JSON.stringify(query)}`,
        ).toEqual(Object.keys(query));
      }
  });

  it("401 INVALID_CREDENTIALS without a key or with an unknown one", async () => {
    for (const path of LISTS) {
      expectEnvelope(await get(path, null), 401, "INVALID_CREDENTIALS");
      expectEnvelope(await get(path, `crm_AAAAAAAAAAAA_${"B".repeat(40)}`), 401, "INVALID_CREDENTIALS");
    }
  });

  it("stages need tenant:leads.read, channels and templates tenant:conversations.read: else 403", async () => {
    const k = acme.apiKeys;
    const cases: [string, string, string][] = [
      [STAGES, "tenant:leads.read", "leads"],
      [CHANNELS, "tenant:conversations.read", "conversations"],
      [TEMPLATES, "tenant:conversations.read", "conversations"],
    ];
    for (const [path, scope, allowed] of cases) {
      expect((await get(path, k[allowed]!.key)).status, `${path} with ${scope}`).toBe(200);
      for (const other of [
        "none",
        "manage",
        "tickets",
        "contacts",
        "appointments",
        allowed === "leads" ? "conversations" : "leads",
      ]) {
        const body = expectEnvelope(await get(path, k[other]!.key), 403, "PERMISSION_DENIED");
        expect(body.details, `${path} with the ${other} key`).toEqual({ requiredScope: scope });
      }
    }
  });

  it("users: any one read scope admits it; manage scopes alone or none: 403 naming the read scopes", async () => {
    const k = acme.apiKeys;
    const expected = await all(USERS);
    for (const one of ["leads", "contacts", "conversations", "appointments", "tickets"]) {
      const r = await get(USERS, k[one]!.key);
      expect(r.status, one).toBe(200);
      expect(r.body.items).toEqual(expected);
    }
    for (const other of ["none", "manage"]) {
      const body = expectEnvelope(await get(USERS, k[other]!.key), 403, "PERMISSION_DENIED");
      expect(body.details).toEqual({ requiredScopes: READ_SCOPES });
    }
  });

  it("the scope is checked before the query: a key without it gets 403 even for a malformed limit", async () => {
    for (const path of LISTS)
      expectEnvelope(await get(path, acme.apiKeys.none!.key, { limit: "x" }), 403, "PERMISSION_DENIED");
  });

  it("each request counts once against the key's quota, with the X-RateLimit-* headers of every answer", async () => {
    for (const path of LISTS) {
      const a = await get(path, full());
      const b = await get(path, full());
      expect(a.headers.get("x-ratelimit-limit")).toBe("100000");
      expect(Number(b.headers.get("x-ratelimit-remaining"))).toBe(Number(a.headers.get("x-ratelimit-remaining")) - 1);
      expect(a.headers.get("x-ratelimit-reset")).toMatch(/^\d+$/);
    }
  });
});

describe("the page byte budget", () => {
  // Names are unbounded text: rows of huge names pass the 4 MiB budget in every list. Templates are
  // bounded by their unique index (a name must fit an index row once compressed), so more of them,
  // each smaller: 30 of 150 kB.
  const HUGE: Record<string, { rows: number; bytes: number }> = {
    [STAGES]: { rows: 3, bytes: 1_500_000 },
    [USERS]: { rows: 3, bytes: 1_500_000 },
    [CHANNELS]: { rows: 3, bytes: 1_500_000 },
    [TEMPLATES]: { rows: 30, bytes: 150_000 },
  };
  beforeAll(async () => {
    const t = big.id;
    const name = (path: string, i: number) => `repeat('x', ${HUGE[path]!.bytes}) || '${String(i).padStart(2, "0")}'`;
    for (let i = 0; i < HUGE[STAGES]!.rows; i++) {
      await app.db.sql.query(
        `INSERT INTO "PipelineStage" ("tenantId", "name", "position") VALUES ($1::uuid, ${name(STAGES, i)}, 10 + ${i})`,
        [t],
      );
      await app.db.sql.query(
        `INSERT INTO "User" ("tenantId", "name", "email") VALUES ($1::uuid, ${name(USERS, i)}, $2)`,
        [t, `x${i}@big.test`],
      );
      await app.db.sql.query(
        `INSERT INTO "Channel" ("tenantId", "kind", "name") VALUES ($1::uuid, 'web', ${name(CHANNELS, i)})`,
        [t],
      );
    }
    for (let i = 0; i < HUGE[TEMPLATES]!.rows; i++)
      await app.db.sql.query(
        `INSERT INTO "MessageTemplate" ("tenantId", "channelId", "name", "language", "body", "approved")
         VALUES ($1::uuid, $2::uuid, ${name(TEMPLATES, i)}, 'en', '{{1}}', true)`,
        [t, big.channels.wa],
      );
  }, 60_000);

  it("each item's size in SQL bounds its JSON: names with quotes, backslashes, controls, emoji", async () => {
    const EDGE = [
      'quote " and backslash \\',
      "new\nline\ttab\r\b\f",
      "\u0001\u001f\u007f\u2028",
      "émoji 😀 ✓",
      "plain",
    ];
    const ids = await app.load(fixture(tenant("sizes")));
    const t = ids.tenants.sizes!;
    for (const [i, name] of EDGE.entries()) {
      await app.db.sql.query(`INSERT INTO "PipelineStage" ("tenantId", "name", "position") VALUES ($1::uuid, $2, $3)`, [
        t.id,
        name,
        5 + i,
      ]);
      await app.db.sql.query(`INSERT INTO "User" ("tenantId", "name", "email") VALUES ($1::uuid, $2, $3)`, [
        t.id,
        name,
        `e${i}@sizes.test`,
      ]);
      await app.db.sql.query(`INSERT INTO "Channel" ("tenantId", "kind", "name") VALUES ($1::uuid, 'messenger', $2)`, [
        t.id,
        name,
      ]);
      await app.db.sql.query(
        `INSERT INTO "MessageTemplate" ("tenantId", "channelId", "name", "language", "body", "approved")
         VALUES ($1::uuid, $2::uuid, $3, $3, '{{1}}', true)`,
        [t.id, t.channels.wa, name],
      );
    }
    const cases: [string, string, ItemSize][] = [
      [STAGES, "PipelineStage", stageSize()],
      [USERS, "User", userSize()],
      [CHANNELS, "Channel", channelSize()],
      [TEMPLATES, "MessageTemplate", templateSize()],
    ];
    for (const [path, table, size] of cases) {
      const items = (await get(path, t.apiKeys.full!.key, { limit: 200 })).body.items as { id: string }[];
      const q = Prisma.sql`SELECT p."id", ${size.ub} AS "ub", ${size.exact} AS "exact"
        FROM (SELECT * FROM ${Prisma.raw(`"${table}"`)} WHERE "tenantId" = ${t.id}::uuid) p`;
      const rows = await app.db.sql.query<{ id: string; ub: string; exact: string }>(q.text, q.values);
      expect(items.length, path).toBeGreaterThanOrEqual(EDGE.length);
      for (const item of items) {
        const row = rows.find((r) => r.id === item.id)!;
        const json = Buffer.byteLength(JSON.stringify(item)) + 1;
        expect(Number(row.exact), `${path} exact`).toBeGreaterThanOrEqual(json);
        expect(Number(row.ub), `${path} ub`).toBeGreaterThanOrEqual(Number(row.exact));
        expect(Number(row.exact) - json, `${path} slack`).toBeLessThanOrEqual(40);
      }
    }
  });

  it("cuts a page at the budget like every list: fewer items, hasNext, same total; the next page goes on", async () => {
    for (const path of LISTS) {
      const key = big.apiKeys.full!.key;
      const first = await get(path, key, { limit: 200 });
      expect(first.status, path).toBe(200);
      const total = first.body.total;
      const huge = (items: { name: string }[]) => items.filter((x) => x.name.length > HUGE[path]!.bytes).length;
      // The page ends before the huge item that would pass the budget.
      expect(huge(first.body.items), path).toBe(Math.floor(ITEMS_BUDGET_BYTES / HUGE[path]!.bytes));
      expect(Buffer.byteLength(first.text)).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
      expect(Buffer.byteLength(JSON.stringify(first.body.items))).toBeLessThanOrEqual(ITEMS_BUDGET_BYTES);
      expect(first.body.pagination.hasNext, path).toBe(true);
      expect(first.body.items.length).toBeLessThan(total);
      const offset = first.body.items.length;
      const rest = await get(path, key, { offset, limit: 200 });
      expect(rest.body.total).toBe(total);
      expect(huge(first.body.items) + huge(rest.body.items)).toBe(HUGE[path]!.rows);
      expect(offset + rest.body.items.length).toBe(total);
      expect(rest.body.pagination.hasNext).toBe(false);
      // Each item came once.
      const ids = [...first.body.items, ...rest.body.items].map((x: { id: string }) => x.id);
      expect(new Set(ids).size).toBe(total);
    }
  }, 120_000);
});
