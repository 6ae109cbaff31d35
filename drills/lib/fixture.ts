// Fixture documents for the drills (the contract's `load` format) and loading them into a drill's
// database. Every raw key and provider token loaded is registered for the secrets check.
import { loadFixture, type FixtureInput, type LoadResult, type TenantIds } from "../../server/admin/fixture.js";
import { openPostgres } from "../../server/db/client.js";
import { migrate } from "../../server/db/migrate.js";
import { ALL_SCOPES } from "../../server/auth/scopes.js";
import { addApiKey, addSecret } from "./observe.js";

export type TenantInput = FixtureInput["tenants"][number];

const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

export interface TenantOptions {
  /** Base URL of the provider stand-in for the whatsapp/telegram/messenger channels. */
  providerBase?: string;
  /** Per-minute / per-day override (default: high enough for load, 1,000,000 / 100,000,000). */
  rateLimit?: { perMinute: number; perDay: number } | null;
  plan?: "starter" | "pro" | "enterprise";
}

/**
 * A tenant with one of everything: users (ana bookable, bob neither), stages, keys of every kind
 * (full, bob's, no scopes, read-only, revoked, expired), WhatsApp/Telegram/web channels with a
 * provider token each, a template, a contact list, contacts (one soft-deleted), conversations with a
 * customer message an hour old (the WhatsApp window is open), leads, an appointment and a ticket.
 */
export function richTenant(ref: string, o: TenantOptions = {}): TenantInput {
  const now = Date.now();
  const base = o.providerBase ?? "http://127.0.0.1:9";
  const tomorrow = Math.ceil(now / (24 * HOUR)) * 24 * HOUR + 24 * HOUR;
  const readScopes = ALL_SCOPES.filter((s) => s.endsWith(".read"));
  return {
    ref,
    name: `Drill ${ref}`,
    plan: o.plan ?? "pro",
    timezone: "Europe/Madrid",
    defaultCountry: "ES",
    slotMinutes: 30,
    rateLimit: o.rateLimit === undefined ? { perMinute: 1_000_000, perDay: 100_000_000 } : o.rateLimit,
    users: [
      {
        ref: "ana",
        name: "Ana Ruiz",
        email: `ana@${ref}.test`,
        bookable: true,
        assignable: true,
        workingHours: [0, 1, 2, 3, 4, 5, 6].map((weekday) => ({ weekday, start: "00:00", end: "24:00" })),
      },
      { ref: "bob", name: "Bob Lee", email: `bob@${ref}.test`, bookable: false, assignable: false },
    ],
    stages: [
      { ref: "new", name: "New", defaultEntry: true },
      { ref: "won", name: "Won" },
    ],
    apiKeys: [
      { ref: "full", owner: "ana", scopes: "all" },
      { ref: "bobkey", owner: "bob", scopes: "all" },
      { ref: "none", owner: "ana", scopes: [] },
      { ref: "read", owner: "ana", scopes: readScopes },
      { ref: "revoked", owner: "ana", scopes: "all", revoked: true },
      { ref: "expired", owner: "ana", scopes: "all", expiresAt: iso(now - HOUR) },
    ],
    channels: [
      {
        ref: "wa",
        kind: "whatsapp",
        name: "WhatsApp",
        config: { baseUrl: base, phoneNumberId: "1001", accessToken: `wa-token-${ref}-Zq81` },
      },
      { ref: "tg", kind: "telegram", name: "Telegram", config: { baseUrl: base, token: `tg-token-${ref}-Yp72` } },
      {
        ref: "fb",
        kind: "messenger",
        name: "Messenger",
        config: { baseUrl: base, accessToken: `fb-token-${ref}-Xo63` },
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
    contactLists: [{ ref: "vip", name: "VIP" }],
    contacts: [
      {
        ref: "bea",
        fullName: "Bea Soto",
        phone: "+34600000001",
        email: `bea@${ref}.test`,
        country: "ES",
        lists: ["vip"],
        createdAt: iso(now - 48 * HOUR),
      },
      {
        ref: "carl",
        fullName: "Carl Diaz",
        phone: "+34600000002",
        email: `carl@${ref}.test`,
        createdAt: iso(now - 47 * HOUR),
      },
      { ref: "gone", fullName: "Gone Person", phone: "+34600000003", deleted: true, createdAt: iso(now - 46 * HOUR) },
    ],
    conversations: [
      {
        ref: "c1",
        channel: "wa",
        status: "active",
        assignedTo: "ana",
        identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", contact: "bea" },
        messages: [{ role: "user", content: "Hi!", createdAt: iso(now - HOUR) }],
        createdAt: iso(now - 2 * HOUR),
      },
      {
        ref: "ct",
        channel: "tg",
        status: "active",
        assignedTo: "ana",
        identity: { externalId: "777001", name: "Carl", contact: "carl" },
        messages: [{ role: "user", content: "Hello from Telegram", createdAt: iso(now - HOUR) }],
        createdAt: iso(now - 2 * HOUR),
      },
      {
        ref: "cf",
        channel: "fb",
        status: "active",
        assignedTo: "ana",
        identity: { externalId: "psid-1", name: "Messenger person" },
        messages: [{ role: "user", content: "Hello from Messenger", createdAt: iso(now - HOUR) }],
        createdAt: iso(now - 2 * HOUR),
      },
      {
        ref: "cw",
        channel: "site",
        status: "active",
        assignedTo: "ana",
        identity: { externalId: "web-visitor-1", name: "Visitor" },
        messages: [{ role: "user", content: "Hi from the web", createdAt: iso(now - HOUR) }],
        createdAt: iso(now - 2 * HOUR),
      },
    ],
    leads: [
      {
        ref: "l1",
        customerName: "Bea Soto",
        customerEmail: `bea@${ref}.test`,
        customerPhone: "+34600000001",
        stage: "new",
        contact: "bea",
        conversation: "c1",
        intent: "buy",
        quality: "hot",
        createdAt: iso(now - 30 * HOUR),
      },
      {
        ref: "l2",
        customerName: "Carl Diaz",
        customerPhone: "+34600000002",
        stage: "won",
        contact: "carl",
        createdAt: iso(now - 29 * HOUR),
      },
    ],
    appointments: [
      {
        ref: "a1",
        assignedTo: "ana",
        title: "Viewing",
        appointmentType: "visit",
        startsAt: iso(tomorrow + 10 * HOUR),
        endsAt: iso(tomorrow + 11 * HOUR),
        status: "scheduled",
        contact: "bea",
        lead: "l1",
      },
    ],
    tickets: [
      {
        ref: "t1",
        subject: "Broken link",
        status: "open",
        createdBy: "ana",
        assignedTo: "ana",
        contact: "bea",
        lead: "l1",
        conversation: "c1",
        comments: [{ author: "ana", body: "Looking into it" }],
      },
    ],
  };
}

/** Migrates the database, loads the document, registers its secrets; returns the id map. */
export async function load(url: string, doc: FixtureInput): Promise<LoadResult> {
  const db = await openPostgres(url, { max: 2 });
  try {
    await migrate(db.sql);
    const ids = await loadFixture(db, doc);
    register(doc, ids);
    return ids;
  } finally {
    await db.close();
  }
}

export function register(doc: FixtureInput, ids: LoadResult): void {
  for (const [ref, t] of Object.entries(ids.tenants))
    for (const [k, v] of Object.entries((t as TenantIds).apiKeys)) addApiKey(v.key, `${ref}.${k}`);
  for (const t of doc.tenants)
    for (const c of t.channels ?? [])
      for (const k of ["accessToken", "token"]) addSecret((c.config as any)?.[k], `provider token ${t.ref}.${c.ref}`);
}
