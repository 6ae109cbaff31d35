// The fixture document of `admin load` (shared/contracts/operations.md): validated with zod, then
// created in one transaction; returns the id map by ref and the raw API keys.
// The bulky kinds (contacts and list memberships, leads, appointments, tickets and comments) are
// inserted in batches — one INSERT … SELECT FROM jsonb_to_recordset per INSERT_BATCH rows, ids made
// here — so a fixture of 100,000 leads loads in seconds; the few users, keys and channels one by one.
import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Database, Db } from "../db/client.js";
import { insertBatch } from "../db/insert.js";
import { transaction } from "../db/transaction.js";
import { generateKey } from "../auth/keys.js";
import { parseScopes } from "../auth/scopes.js";
import { DateTimeInput } from "../../routers/_lib/schemas.js";
import { MAX_JSON_DEPTH, valueDepthExceeds } from "../body.js";
import { parsePhone } from "../phone.js";

const Ref = z.string().min(1).max(200);
/** A timestamp: the API's date-time input (ISO 8601 with an offset, years 0001–9999 in UTC). */
const When = DateTimeInput;
const ScopeList = z.union([z.literal("all"), z.array(z.string())]);
const HHMM = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$|^24:00$/, "expected HH:MM");

const User = z
  .object({
    ref: Ref,
    name: z.string().min(1).optional(),
    email: z.string().min(1).optional(),
    bookable: z.boolean().default(true),
    assignable: z.boolean().default(true),
    apiGrant: ScopeList.default("all"),
    workingHours: z.array(z.object({ weekday: z.number().int().min(0).max(6), start: HHMM, end: HHMM }).strict()).default([]),
  })
  .strict();

const Stage = z.object({ ref: Ref, name: z.string().min(1).optional(), defaultEntry: z.boolean().default(false) }).strict();

const ApiKey = z
  .object({
    ref: Ref,
    owner: Ref,
    scopes: ScopeList.default("all"),
    expiresAt: When.nullable().default(null),
    revoked: z.boolean().default(false),
    name: z.string().optional(),
  })
  .strict();

const Channel = z
  .object({
    ref: Ref,
    kind: z.enum(["web", "whatsapp", "messenger", "instagram", "telegram"]),
    name: z.string().min(1).optional(),
    connected: z.boolean().default(true),
    config: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();

const Template = z
  .object({
    ref: Ref,
    channel: Ref,
    name: z.string().min(1),
    language: z.string().min(1),
    body: z.string().default(""),
    approved: z.boolean().default(true),
  })
  .strict();

const Contact = z
  .object({
    ref: Ref,
    fullName: z.string().nullable().default(null),
    phone: z.string().min(1).nullable().default(null),
    email: z.string().min(1).nullable().default(null),
    country: z.string().length(2).nullable().default(null),
    deleted: z.boolean().default(false),
    lists: z.array(Ref).default([]),
    marketingOptOut: z.boolean().default(false),
    phoneVerifiedAt: When.nullable().default(null),
    emailVerifiedAt: When.nullable().default(null),
    origin: z.string().min(1).default("import"),
    createdAt: When.optional(),
  })
  .strict();

const Message = z
  .object({
    role: z.enum(["user", "assistant", "operator", "system"]),
    content: z.string(),
    createdAt: When.optional(),
    deliveryStatus: z.enum(["received", "pending", "sent", "delivered", "failed"]).optional(),
    author: Ref.optional(),
  })
  .strict();

const Conversation = z
  .object({
    ref: Ref,
    channel: Ref,
    status: z.enum(["active", "escalated", "resolved"]).default("active"),
    subject: z.string().nullable().default(null),
    assignedTo: Ref.nullable().default(null),
    identity: z
      .object({
        externalId: z.string().min(1),
        name: z.string().nullable().default(null),
        phone: z.string().nullable().default(null),
        email: z.string().nullable().default(null),
        contact: Ref.nullable().default(null),
      })
      .strict()
      .nullable()
      .default(null),
    messages: z.array(Message).default([]),
    createdAt: When.optional(),
  })
  .strict();

const Lead = z
  .object({
    ref: Ref,
    customerName: z.string().min(1),
    customerEmail: z.string().nullable().default(null),
    customerPhone: z.string().nullable().default(null),
    stage: Ref.optional(),
    contact: Ref.nullable().default(null),
    conversation: Ref.nullable().default(null),
    intent: z.string().default("unknown"),
    quality: z.string().default("unknown"),
    budget: z.object({ min: z.number().int().nullable(), max: z.number().int().nullable() }).strict().nullable().default(null),
    zones: z.array(z.string()).default([]),
    rooms: z.number().int().nullable().default(null),
    assignedTo: Ref.nullable().default(null),
    source: z.string().default("import"),
    notes: z.string().nullable().default(null),
    createdAt: When.optional(),
  })
  .strict();

const Appointment = z
  .object({
    ref: Ref,
    assignedTo: Ref,
    title: z.string().min(1),
    appointmentType: z.string().min(1),
    startsAt: When,
    endsAt: When,
    status: z.enum(["scheduled", "cancelled", "completed", "no_show"]).default("scheduled"),
    contact: Ref.nullable().default(null),
    lead: Ref.nullable().default(null),
    conversation: Ref.nullable().default(null),
    source: z.string().default("manual"),
    notes: z.string().nullable().default(null),
    createdAt: When.optional(),
  })
  .strict();

const Ticket = z
  .object({
    ref: Ref,
    subject: z.string().min(1).max(500),
    status: z.enum(["open", "pending", "resolved", "closed"]).default("open"),
    createdBy: Ref,
    assignedTo: Ref.nullable().default(null),
    contact: Ref.nullable().default(null),
    lead: Ref.nullable().default(null),
    conversation: Ref.nullable().default(null),
    comments: z.array(z.object({ author: Ref, body: z.string().min(1), createdAt: When.optional() }).strict()).default([]),
    createdAt: When.optional(),
  })
  .strict();

const Tenant = z
  .object({
    ref: Ref,
    name: z.string().min(1).optional(),
    plan: z.enum(["starter", "pro", "enterprise"]).default("pro"),
    timezone: z.string().default("UTC"),
    defaultCountry: z.string().length(2).nullable().default(null),
    slotMinutes: z.number().int().min(5).max(1440).default(30),
    rateLimit: z.object({ perMinute: z.number().int().min(0), perDay: z.number().int().min(0) }).strict().nullable().default(null),
    users: z.array(User).default([]),
    stages: z.array(Stage).default([]),
    apiKeys: z.array(ApiKey).default([]),
    channels: z.array(Channel).default([]),
    templates: z.array(Template).default([]),
    contactLists: z.array(z.object({ ref: Ref, name: z.string().min(1).optional() }).strict()).default([]),
    contacts: z.array(Contact).default([]),
    conversations: z.array(Conversation).default([]),
    leads: z.array(Lead).default([]),
    appointments: z.array(Appointment).default([]),
    tickets: z.array(Ticket).default([]),
  })
  .strict();

export const Fixture = z.object({ tenants: z.array(Tenant).min(1) }).strict();
export type FixtureInput = z.input<typeof Fixture>;

export interface TenantIds {
  id: string;
  users: Record<string, string>;
  stages: Record<string, string>;
  apiKeys: Record<string, { id: string; key: string; prefix: string }>;
  channels: Record<string, string>;
  templates: Record<string, string>;
  contactLists: Record<string, string>;
  contacts: Record<string, string>;
  conversations: Record<string, string>;
  identities: Record<string, string | null>;
  leads: Record<string, string>;
  appointments: Record<string, string>;
  tickets: Record<string, string>;
}
export interface LoadResult {
  tenants: Record<string, TenantIds>;
}

export class FixtureError extends Error {}

function refs(kind: string, items: { ref: string }[]): void {
  const seen = new Set<string>();
  for (const i of items) {
    if (seen.has(i.ref)) throw new FixtureError(`duplicate ${kind} ref "${i.ref}"`);
    seen.add(i.ref);
  }
}

function lookup(map: Record<string, string>, kind: string, ref: string | null | undefined, where: string): string | null {
  if (ref === null || ref === undefined) return null;
  const id = map[ref];
  if (!id) throw new FixtureError(`${where}: unknown ${kind} ref "${ref}"`);
  return id;
}

const isTimeZone = (tz: string) => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};

/** Validates and loads a fixture document in one transaction. Throws FixtureError (or a database error) and persists nothing on failure. */
export async function loadFixture(db: Database, document: unknown): Promise<LoadResult> {
  // Free-form parts (channel config) are stored as JSON, which Prisma serializes recursively.
  if (valueDepthExceeds(document)) throw new FixtureError(`invalid fixture: nested deeper than ${MAX_JSON_DEPTH} levels`);
  const parsed = Fixture.safeParse(document);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new FixtureError(`invalid fixture at ${i.path.join(".") || "(root)"}: ${i.message}`);
  }
  const fixture = parsed.data;
  refs("tenant", fixture.tenants);
  // One transaction for the whole document, allowed to run long (Prisma's default is 30 s), without
  // the pool's statement_timeout (also when loaded through /trpc-admin inside the service).
  return transaction(
    db.prisma,
    async (tx) => {
      await tx.$executeRawUnsafe("SET LOCAL statement_timeout = 0");
      const out: LoadResult = { tenants: {} };
      for (const t of fixture.tenants) out.tenants[t.ref] = await loadTenant(tx, t);
      return out;
    },
    { timeoutMs: LOAD_TIMEOUT_MS },
  );
}

const INSERT_BATCH = 5_000;
const LOAD_TIMEOUT_MS = 15 * 60_000;

/**
 * createdAt of rows loaded without one: the time of the load, a millisecond apart in fixture order
 * (the last one at `at`), so that newest-first lists show them in reverse fixture order and none lies
 * in the future.
 */
const loadedAt = (at: Date, i: number, count: number) => new Date(at.getTime() - (count - 1 - i));

async function loadTenant(tx: Db, t: z.output<typeof Tenant>): Promise<TenantIds> {
  const at = `tenant "${t.ref}"`;
  for (const [kind, list] of Object.entries({
    user: t.users, stage: t.stages, apiKey: t.apiKeys, channel: t.channels, template: t.templates, contactList: t.contactLists,
    contact: t.contacts, conversation: t.conversations, lead: t.leads, appointment: t.appointments, ticket: t.tickets,
  }))
    refs(kind, list);
  if (!isTimeZone(t.timezone)) throw new FixtureError(`${at}: unknown timezone "${t.timezone}"`);
  if (t.stages.filter((s) => s.defaultEntry).length > 1) throw new FixtureError(`${at}: more than one default-entry stage`);

  const tenant = await tx.tenant.create({
    data: {
      name: t.name ?? t.ref,
      plan: t.plan,
      timezone: t.timezone,
      defaultCountry: t.defaultCountry?.toUpperCase() ?? null,
      slotMinutes: t.slotMinutes,
      rateLimitPerMinute: t.rateLimit?.perMinute ?? null,
      rateLimitPerDay: t.rateLimit?.perDay ?? null,
    },
  });
  const tenantId = tenant.id;
  const ids: TenantIds = {
    id: tenantId, users: {}, stages: {}, apiKeys: {}, channels: {}, templates: {}, contactLists: {}, contacts: {},
    conversations: {}, identities: {}, leads: {}, appointments: {}, tickets: {},
  };
  const scopes = (v: "all" | string[], where: string) => {
    try {
      return parseScopes(v);
    } catch (e) {
      throw new FixtureError(`${where}: ${(e as Error).message}`);
    }
  };

  for (const u of t.users) {
    const user = await tx.user.create({
      data: {
        tenantId,
        name: u.name ?? u.ref,
        email: u.email ?? `${u.ref}@${t.ref}.invalid`,
        bookable: u.bookable,
        assignable: u.assignable,
        apiGrant: scopes(u.apiGrant, `${at} user "${u.ref}" apiGrant`),
      },
    });
    ids.users[u.ref] = user.id;
    for (const h of u.workingHours) {
      if (h.end <= h.start) throw new FixtureError(`${at} user "${u.ref}": working hours end before they start`);
      await tx.workingHours.create({ data: { tenantId, userId: user.id, weekday: h.weekday, start: h.start, end: h.end } });
    }
  }

  const stages = t.stages.length ? t.stages : [{ ref: "new", name: "New", defaultEntry: true }];
  const defaultRef = stages.find((s) => s.defaultEntry)?.ref ?? stages[0]!.ref;
  for (const [position, s] of stages.entries()) {
    const stage = await tx.pipelineStage.create({
      data: { tenantId, name: s.name ?? s.ref, position, defaultEntry: s.ref === defaultRef },
    });
    ids.stages[s.ref] = stage.id;
  }

  for (const k of t.apiKeys) {
    const ownerId = lookup(ids.users, "user", k.owner, `${at} apiKey "${k.ref}"`)!;
    const g = generateKey();
    const key = await tx.apiKey.create({
      data: {
        tenantId,
        ownerId,
        name: k.name ?? k.ref,
        prefix: g.prefix,
        keyHash: g.hash,
        scopes: scopes(k.scopes, `${at} apiKey "${k.ref}" scopes`),
        expiresAt: k.expiresAt,
        revokedAt: k.revoked ? new Date() : null,
      },
    });
    ids.apiKeys[k.ref] = { id: key.id, key: g.key, prefix: g.prefix };
  }

  for (const c of t.channels) {
    const ch = await tx.channel.create({
      data: { tenantId, kind: c.kind, name: c.name ?? c.ref, connected: c.connected, config: c.config as object },
    });
    ids.channels[c.ref] = ch.id;
  }
  for (const tpl of t.templates) {
    const channelId = lookup(ids.channels, "channel", tpl.channel, `${at} template "${tpl.ref}"`)!;
    const row = await tx.messageTemplate.create({
      data: { tenantId, channelId, name: tpl.name, language: tpl.language, body: tpl.body, approved: tpl.approved },
    });
    ids.templates[tpl.ref] = row.id;
  }
  for (const l of t.contactLists) {
    const row = await tx.contactList.create({ data: { tenantId, name: l.name ?? l.ref } });
    ids.contactLists[l.ref] = row.id;
  }

  const loadStart = new Date();
  const contactRows: Record<string, unknown>[] = [];
  const memberRows: Record<string, unknown>[] = [];
  for (const [i, c] of t.contacts.entries()) {
    const where = `${at} contact "${c.ref}"`;
    let phone: string | null = null;
    if (c.phone !== null) {
      const parsed = parsePhone(c.phone, c.country ?? t.defaultCountry);
      if (!parsed.ok) throw new FixtureError(`${where}: invalid phone "${c.phone}" (${parsed.problem})`);
      phone = parsed.e164;
    }
    const id = randomUUID();
    const createdAt = c.createdAt ?? loadedAt(loadStart, i, t.contacts.length);
    contactRows.push({
      id,
      tenantId,
      fullName: c.fullName,
      phone,
      email: c.email,
      country: c.country?.toUpperCase() ?? null,
      phoneVerifiedAt: c.phoneVerifiedAt,
      emailVerifiedAt: c.emailVerifiedAt,
      marketingOptOut: c.marketingOptOut,
      marketingOptOutAt: c.marketingOptOut ? (c.createdAt ?? loadStart) : null,
      origin: c.origin,
      deletedAt: c.deleted ? loadStart : null,
      createdAt,
      updatedAt: createdAt,
    });
    ids.contacts[c.ref] = id;
    for (const list of c.lists) {
      const listId = lookup(ids.contactLists, "contactList", list, where)!;
      memberRows.push({ tenantId, listId, contactId: id });
    }
  }
  await insertBatch(tx, "Contact", contactRows, INSERT_BATCH);
  await insertBatch(tx, "ContactListMember", memberRows, INSERT_BATCH);

  const identityByAddress = new Map<string, { identityId: string; customerId: string }>();
  for (const c of t.conversations) {
    const where = `${at} conversation "${c.ref}"`;
    const channelId = lookup(ids.channels, "channel", c.channel, where)!;
    let customerId: string;
    let identityId: string | null = null;
    if (c.identity) {
      const address = `${channelId}\u0000${c.identity.externalId}`;
      const existing = identityByAddress.get(address);
      if (existing) {
        ({ identityId, customerId } = existing);
      } else {
        const customer = await tx.customer.create({
          data: {
            tenantId,
            name: c.identity.name,
            email: c.identity.email,
            phone: c.identity.phone,
            contactId: lookup(ids.contacts, "contact", c.identity.contact, where),
          },
        });
        const identity = await tx.channelIdentity.create({
          data: { tenantId, customerId: customer.id, channelId, externalId: c.identity.externalId },
        });
        customerId = customer.id;
        identityId = identity.id;
        identityByAddress.set(address, { identityId, customerId });
      }
    } else {
      customerId = (await tx.customer.create({ data: { tenantId } })).id;
    }
    const createdAt = c.createdAt ?? c.messages[0]?.createdAt ?? new Date();
    const messages = c.messages.map((m, i) => ({ ...m, createdAt: m.createdAt ?? new Date(createdAt.getTime() + i) }));
    const newest = messages.reduce<(typeof messages)[number] | undefined>((a, m) => (!a || m.createdAt >= a.createdAt ? m : a), undefined);
    const conv = await tx.conversation.create({
      data: {
        tenantId,
        channelId,
        customerId,
        identityId,
        status: c.status,
        subject: c.subject,
        assignedOperatorId: lookup(ids.users, "user", c.assignedTo, where),
        lastMessagePreview: newest ? preview(newest.content) : "",
        lastMessageAt: newest?.createdAt ?? createdAt,
        createdAt,
        updatedAt: newest?.createdAt ?? createdAt,
      },
    });
    ids.conversations[c.ref] = conv.id;
    ids.identities[c.ref] = identityId;
    if (messages.length)
      await tx.message.createMany({
        data: messages.map((m) => ({
          tenantId,
          conversationId: conv.id,
          role: m.role,
          content: m.content,
          deliveryStatus: m.deliveryStatus ?? (m.role === "user" ? "received" : "sent"),
          authorUserId: lookup(ids.users, "user", m.author, where),
          createdAt: m.createdAt,
        })),
      });
  }

  const leadRows: Record<string, unknown>[] = [];
  for (const [i, l] of t.leads.entries()) {
    const where = `${at} lead "${l.ref}"`;
    if (l.budget && l.budget.min !== null && l.budget.max !== null && l.budget.min > l.budget.max)
      throw new FixtureError(`${where}: budget.min is greater than budget.max`);
    const id = randomUUID();
    const createdAt = l.createdAt ?? loadedAt(loadStart, i, t.leads.length);
    leadRows.push({
      id,
      tenantId,
      customerName: l.customerName,
      customerEmail: l.customerEmail,
      customerPhone: l.customerPhone,
      stageId: l.stage ? lookup(ids.stages, "stage", l.stage, where)! : ids.stages[defaultRef]!,
      customerId: lookup(ids.contacts, "contact", l.contact, where),
      conversationId: lookup(ids.conversations, "conversation", l.conversation, where),
      intent: l.intent,
      quality: l.quality,
      budgetMin: l.budget?.min ?? null,
      budgetMax: l.budget?.max ?? null,
      zones: l.zones,
      rooms: l.rooms,
      assignedOperatorId: lookup(ids.users, "user", l.assignedTo, where),
      source: l.source,
      notes: l.notes,
      createdAt,
      updatedAt: createdAt,
    });
    ids.leads[l.ref] = id;
  }
  await insertBatch(tx, "Lead", leadRows, INSERT_BATCH);

  const appointmentRows: Record<string, unknown>[] = [];
  for (const [i, a] of t.appointments.entries()) {
    const where = `${at} appointment "${a.ref}"`;
    if (a.endsAt <= a.startsAt) throw new FixtureError(`${where}: endsAt must be after startsAt`);
    const id = randomUUID();
    const createdAt = a.createdAt ?? loadedAt(loadStart, i, t.appointments.length);
    appointmentRows.push({
      id,
      tenantId,
      assignedUserId: lookup(ids.users, "user", a.assignedTo, where)!,
      title: a.title,
      appointmentType: a.appointmentType,
      startsAt: a.startsAt,
      endsAt: a.endsAt,
      status: a.status,
      customerId: lookup(ids.contacts, "contact", a.contact, where),
      leadId: lookup(ids.leads, "lead", a.lead, where),
      conversationId: lookup(ids.conversations, "conversation", a.conversation, where),
      source: a.source,
      notes: a.notes,
      createdAt,
      updatedAt: createdAt,
    });
    ids.appointments[a.ref] = id;
  }
  await insertBatch(tx, "Appointment", appointmentRows, INSERT_BATCH);

  const ticketRows: Record<string, unknown>[] = [];
  const commentRows: Record<string, unknown>[] = [];
  for (const [n, tk] of t.tickets.entries()) {
    const where = `${at} ticket "${tk.ref}"`;
    const customerId = lookup(ids.contacts, "contact", tk.contact, where);
    const leadId = lookup(ids.leads, "lead", tk.lead, where);
    const conversationId = lookup(ids.conversations, "conversation", tk.conversation, where);
    if (!customerId && !leadId && !conversationId) throw new FixtureError(`${where}: needs a contact, lead or conversation`);
    const id = randomUUID();
    const createdAt = tk.createdAt ?? loadedAt(loadStart, n, t.tickets.length);
    ticketRows.push({
      id,
      tenantId,
      subject: tk.subject,
      status: tk.status,
      createdById: lookup(ids.users, "user", tk.createdBy, where)!,
      assignedToId: lookup(ids.users, "user", tk.assignedTo, where),
      customerId,
      leadId,
      conversationId,
      createdAt,
      updatedAt: createdAt,
    });
    ids.tickets[tk.ref] = id;
    for (const [i, cm] of tk.comments.entries()) {
      commentRows.push({
        id: randomUUID(),
        tenantId,
        ticketId: id,
        authorUserId: lookup(ids.users, "user", cm.author, where)!,
        body: cm.body,
        createdAt: cm.createdAt ?? new Date(createdAt.getTime() + i + 1),
      });
    }
  }
  await insertBatch(tx, "Ticket", ticketRows, INSERT_BATCH);
  // In fixture order: the TicketComment_admit trigger numbers each ticket's comments (seq) and
  // refuses a thread past its bounds (the load then fails as a whole).
  await insertBatch(tx, "TicketComment", commentRows, INSERT_BATCH);
  return ids;
}

export const preview = (content: string) => (content.length > 200 ? `${content.slice(0, 199)}…` : content);
