// GET /public/v1/changes — the gapless changes feed (issue 15; docs/architecture.md, "Changes feed").
//   since   opaque token from a previous answer (`nextSince`); absent = from the beginning: every
//           live object once, so one loop both bootstraps and follows
//   types   comma list of lead, contact, conversation, appointment, ticket (default: every type the
//           key can read)
//   limit   1–500, default 100
// Check order: no read scope at all → 403; parameters (422); a requested type the key cannot read →
// 403; the token: malformed or another tenant's → 422 (field `since`), older than the retention or
// ahead of the feed → 422 with details.code "since_expired" (restart from the beginning).
// The page: the tenant's pending changes are placed first (one sequencer step, only when it has
// some), then one statement reads the head and the positions after `since` (index range scans
// only), a second sizes each position's object in SQL (routers/_lib/page-budget.ts) and keeps the
// prefix that fits the byte budget; only those objects are loaded, with one query per type present
// (the type's own list select), serialised exactly as their own GET/list does and each counted at its
// own JSON's bytes (an object changed since it was sized counts as loaded). The response is bounded
// to PAGE_BUDGET_BYTES (at least one item).
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { CHANGES_RETENTION_DAYS, CHANGES_RETENTION_MS, sequenceChanges } from "../../server/changes.js";
import { AppError, validation } from "../../server/errors.js";
import { currentCaller } from "../../server/auth/authenticate.js";
import { readFor } from "../../server/db/insert.js";
import { Appointment, toAppointment, type AppointmentRow } from "../../model/appointment.js";
import { Contact, toContact, type ContactRow } from "../../model/contact.js";
import { Conversation, toConversation, type ConversationRow } from "../../model/conversation.js";
import { toLead, type LeadRow } from "../../model/lead.js";
import { selectConversations } from "../conversations/schemas.js";
import { selectLeads } from "../leads/schemas.js";
import {
  appointmentSize,
  budgeted,
  BUDGET_DOC,
  contactSize,
  conversationSize,
  fixedBytes,
  leadSize,
  oversizedAllowed,
  ticketSize,
  type Col,
  type ItemSize,
} from "../_lib/page-budget.js";
import { queryIntDefault } from "../_lib/schemas.js";
import { fromThreadRow, selectTickets, type TicketThreadRow } from "../tickets/schemas.js";
import { scopedAny, type AuthedContext } from "../trpc.js";
import { MAX_WAITERS_PER_KEY } from "../../server/wakeups.js";
import {
  CHANGE_TYPES,
  ChangePage,
  decodeSince,
  encodeSince,
  MAX_SINCE_LENGTH,
  READ_SCOPE,
  TypesInput,
  type ChangeAction,
  type ChangeItem,
  type ChangeType,
  type SinceToken,
} from "./schemas.js";

export const MAX_CHANGES_LIMIT = 500;
/** The longest `wait` of a long-poll, in seconds (under the 30 s idle timeout of common proxies). */
export const MAX_WAIT_S = 25;
/** `since=now`: a chain that starts at the feed's head (what was committed before the request). */
export const SINCE_NOW = "now";
export const DEFAULT_CHANGES_LIMIT = 100;
/** Seconds a client that does not long-poll should leave between two calls of a caught-up chain (X-Poll-Interval). */
export const POLL_INTERVAL_S = 5;
/** Seconds a long-poll refused a place (past a cap, or stopping) tells its client to wait (`backoff`). */
export const BACKOFF_S = 5;

export const ListChangesInput = z.object({
  since: z
    .string()
    .max(MAX_SINCE_LENGTH)
    .meta({
      description:
        "The `nextSince` of the previous answer. Absent: from the beginning (every live object once). `now`: from the feed's head — no items, and a `nextSince` after everything committed before the request.",
    })
    .optional(),
  types: TypesInput.optional(),
  limit: queryIntDefault("limit", 1, MAX_CHANGES_LIMIT, DEFAULT_CHANGES_LIMIT),
  wait: queryIntDefault("wait", 0, MAX_WAIT_S, 0),
});
export type ListChangesInput = z.infer<typeof ListChangesInput>;

const DESCRIPTION = `A feed of every change of the tenant's leads, contacts, conversations, appointments and tickets, for mirroring without re-reading everything.

Follow \`nextSince\` (as \`since\`) until \`hasMore\` is false, then ask again later with the last \`nextSince\`. Without \`since\` the feed starts from the beginning and returns every live object once, so one loop both bootstraps and follows. Guarantees: every object's latest state is delivered at least once after each of its changes — also under concurrent writers and long-running transactions (a change gets its place when its transaction commits, after everything delivered before); items come in commit order; several changes of one object between two polls may be compacted into its latest state; a poll with nothing new returns \`items: []\` and an equivalent \`nextSince\`.

Each item: \`type\`, \`id\`, \`action\` and \`changedAt\`; \`data\` is exactly what the object's own GET/list returns at that moment (a ticket with its thread); \`delete\` (a soft-deleted contact) carries \`data: null\`. A new message is a change of its conversation, a new ticket comment a change of its ticket.

\`types\` defaults to every type the key can read (\`tenant:<resource>.read\`); an explicitly requested type the key cannot read gives 403 PERMISSION_DENIED, as does a key that can read none. A malformed or another tenant's \`since\` gives 422 VALIDATION_ERROR (\`details.fields[0].field\` = \`since\`). Tokens are valid for ${CHANGES_RETENTION_DAYS} days from the last time a page caught up: an older one gives 422 VALIDATION_ERROR with \`details.code\` = \`since_expired\` — start again without \`since\` and rebuild the mirror. \`limit\`: 1–500, default 100. ${BUDGET_DOC}, with \`hasMore\` true: continue with \`nextSince\` (nothing is skipped).

Long-poll: with \`wait\` (seconds, 0–${MAX_WAIT_S}, default 0: answer at once), a page that would be empty waits until a change of the requested types is in the feed (then answers as usual) or until \`wait\` passes (then \`items: []\`, \`hasMore: false\` and a \`nextSince\` that loses nothing). It may answer earlier and empty (the service stopping): ask again. The key is checked again before a page is delivered after a wait (revoked or expired: 401; plan or scope lost: 403). At most ${MAX_WAITERS_PER_KEY} waits per key are held at once on one instance (and a per-instance cap): past it the page comes at once with \`backoff\`, the seconds to leave before the next call. A long-poll counts as one request. Every answer carries \`X-Poll-Interval\`: the seconds a client that does not use \`wait\` should leave between calls once caught up. \`since=now\` starts a chain at the feed's head: no items, and a \`nextSince\` after everything committed before the request.`;

export const listChanges = scopedAny(CHANGE_TYPES.map((t) => READ_SCOPE[t]))
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/changes",
      tags: ["changes"],
      summary: "Changes feed",
      description: DESCRIPTION,
      protect: true,
    },
    pollInterval: POLL_INTERVAL_S,
    abortable: true,
  })
  .input(ListChangesInput)
  .output(ChangePage)
  .query(async ({ ctx, input, signal }) => {
    const readable = CHANGE_TYPES.filter((t) => ctx.caller.scopes.includes(READ_SCOPE[t]));
    const types = input.types ?? readable;
    const denied = types.filter((t) => !readable.includes(t));
    if (denied.length)
      throw new AppError("PERMISSION_DENIED", `This key cannot read ${denied.join(", ")}`, {
        requiredScopes: denied.map((t) => READ_SCOPE[t]),
      });

    const now = ctx.services.now().getTime();
    // Taken before the read: a write between the read and a long-poll's wait wakes it (server/wakeups.ts).
    const mark = ctx.services.wakeups?.mark() ?? 0;
    const page =
      input.since === SINCE_NOW
        ? await headPage(ctx, types, now)
        : await readPage(
            ctx,
            types,
            input.since === undefined ? undefined : checkSince(input.since, ctx.tenantId, now),
            input.limit,
            now,
          );
    if (input.wait === 0 || page.items.length > 0 || page.hasMore) return page;
    return longPoll(ctx, types, input, page, mark, signal);
  });

export type Page = z.infer<typeof ChangePage>;

/**
 * The wait of a caught-up page (`wait` > 0): until a change of the requested types is placed, or the
 * wait passes. Holds no connection while it waits (server/wakeups.ts); each wake-up reads the feed
 * again from the page's own `nextSince` (placing the tenant's pending changes first, as any page
 * does), and the key is checked again before whatever it answers; a client that goes away ends it.
 * Past the key's or the instance's cap of waiters (or while stopping) it answers the page at once,
 * with `backoff`.
 */
async function longPoll(
  ctx: AuthedContext,
  types: readonly ChangeType[],
  input: ListChangesInput,
  first: Page,
  firstMark: number,
  signal: AbortSignal | undefined,
) {
  let page = first;
  const wakeups = ctx.services.wakeups;
  const release = wakeups?.admit(waiterOf(ctx));
  if (!wakeups || !release) return { ...page, backoff: BACKOFF_S };
  const until = Date.now() + input.wait * 1000;
  try {
    let mark = firstMark;
    for (;;) {
      const why = await wakeups.wait(ctx.tenantId, until, signal, mark);
      // The client went away: its place is free at once (nobody reads this answer).
      if (signal?.aborted) return page;
      await recheckCaller(ctx, types);
      if (why === "closing" || why === "deadline") return page;
      const now = ctx.services.now().getTime();
      mark = wakeups.mark();
      page = await readPage(ctx, types, decodeSince(page.nextSince, ctx.tenantId) as SinceToken, input.limit, now);
      if (page.items.length > 0 || page.hasMore) {
        observeDelivery(ctx, page, "long-poll");
        return page;
      }
    }
  } finally {
    release();
  }
}

/**
 * The key as it is now, before a page is delivered after a wait: revoked, expired, its plan no
 * longer eligible (401/403 as at the start of a request), or a requested type no longer readable
 * (403 PERMISSION_DENIED).
 */
/**
 * A page a wait ended, into the delivery-latency histogram: from its oldest change's time (the
 * database's clock) to now (a clock behind the database's counts as 0).
 */
export function observeDelivery(ctx: AuthedContext, page: Page, via: "long-poll" | "subscription"): void {
  if (page.items.length === 0) return;
  const oldest = Math.min(...page.items.map((i) => Date.parse(i.changedAt)));
  ctx.services.metrics.changesDelivery.observe({ via }, Math.max(0, Date.now() - oldest) / 1000);
}

/** Whose waits count against the per-key cap: the key, or for trusted internal code its user. */
export const waiterOf = (ctx: AuthedContext) => ctx.caller.keyId || `actor:${ctx.caller.ownerId}`;

export async function recheckCaller(ctx: AuthedContext, types: readonly ChangeType[]) {
  // Trusted internal code (server/core.ts) has no key to check: its scopes are its own.
  if (ctx.caller.keyHash === "") return;
  const now = await currentCaller(ctx.services.db, ctx.caller, ctx.services.now());
  const lost = types.filter((t) => !now.scopes.includes(READ_SCOPE[t]));
  if (lost.length)
    throw new AppError("PERMISSION_DENIED", `This key cannot read ${lost.join(", ")}`, {
      requiredScopes: lost.map((t) => READ_SCOPE[t]),
    });
}

/** `since=now`: the tenant's committed changes placed, no items, and a token at the head. */
export async function headPage(ctx: AuthedContext, types: readonly ChangeType[], now: number): Promise<Page> {
  const ahead: SinceToken = { pos: Number.MAX_SAFE_INTEGER, skip: 0, at: now };
  let read = await readPositions(ctx, types, ahead, 0, true);
  if (read.pending) {
    await sequenceChanges(ctx.services.db.prisma, { tenantId: ctx.tenantId });
    read = await readPositions(ctx, types, ahead, 0, false);
  }
  return { items: [], nextSince: encodeSince(ctx.tenantId, { pos: read.head, skip: 0, at: now }), hasMore: false };
}

/** One page after `token` (absent: from the beginning). */
export async function readPage(
  ctx: AuthedContext,
  types: readonly ChangeType[],
  token: SinceToken | undefined,
  limit: number,
  now: number,
): Promise<Page> {
  // Place this tenant's committed changes first (only when it has any), so that the page holds
  // everything committed before the request.
  let read = await readPositions(ctx, types, token, limit, true);
  if (read.pending) {
    await sequenceChanges(ctx.services.db.prisma, { tenantId: ctx.tenantId });
    read = await readPositions(ctx, types, token, limit, false);
  }
  const { head, rows } = read;
  if (token && (token.pos > head || token.skip > head))
    throw sinceExpired("since is ahead of this feed (was the data restored?): start again without since");

  // The page's objects sized in SQL before any is loaded, cut to the byte budget (sizePositions: a
  // poll with nothing new costs no statement more): more when a position past the limit was read
  // or the budget left some out.
  const read0 = rows.slice(0, limit);
  const page = await sizePositions(ctx, read0);
  let more = rows.length > limit || page.length < read0.length;
  const objects = await loadObjects(ctx, page);
  const items: ChangeItem[] = [];
  let bytes = 0;
  for (const row of page) {
    const data = (row.action === "delete" ? undefined : objects.get(row.type)?.get(row.objectId)) ?? null;
    const action: ChangeAction = data === null ? "delete" : "upsert";
    const item = {
      type: row.type,
      id: row.objectId,
      action,
      changedAt: row.changedAt.toISOString(),
      data,
    } as ChangeItem;
    // Each loaded item counts its own JSON: an object changed since it was sized (the load is a later
    // statement) counts as it is now, so the budget holds whatever happened in between.
    bytes += Buffer.byteLength(JSON.stringify(item)) + 1;
    // Past the budget: the page ends (its first item always comes, but in a /trpc batch only one
    // call may answer an item larger than its share: oversizedAllowed).
    if (bytes > ctx.pageBudget && (items.length > 0 || !oversizedAllowed(ctx, item))) {
      more = true;
      break;
    }
    items.push(item);
  }

  // Caught up: everything of these types up to the head (same snapshot) was read; positions at or
  // below it can never be handed out again, so the next poll starts there. A page that ends before
  // its first item continues where it started.
  const last = page[items.length - 1];
  const pos = more ? (last?.pos ?? token?.pos ?? 0) : head;
  const skip = token ? token.skip : head;
  const next: SinceToken = {
    pos,
    skip: pos >= skip ? 0 : skip,
    // The retention clock restarts each time a page catches up (and at the start of a chain).
    at: more && token ? token.at : now,
  };
  return { items, nextSince: encodeSince(ctx.tenantId, next), hasMore: more };
}

// ---- the token ------------------------------------------------------------------------------------

function sinceExpired(message: string) {
  return validation(message, { code: "since_expired", fields: [{ field: "since", code: "since_expired", message }] });
}

export function checkSince(raw: string, tenantId: string, now: number): SinceToken {
  const t = decodeSince(raw, tenantId);
  if (t === "malformed" || t === "foreign") {
    const message = t === "foreign" ? "since belongs to another tenant's feed" : "since is not a token of this feed";
    throw validation(message, { fields: [{ field: "since", code: "invalid_token", message }] });
  }
  if (t.at < now - CHANGES_RETENTION_MS)
    throw sinceExpired(
      `since is older than the feed's retention (${CHANGES_RETENTION_DAYS} days): start again without since`,
    );
  return t;
}

// ---- reading --------------------------------------------------------------------------------------

interface Position {
  type: ChangeType;
  objectId: string;
  pos: number;
  action: ChangeAction;
  changedAt: Date;
}

interface RawPosition {
  head: bigint | number | string | null;
  pending: boolean;
  type: ChangeType | null;
  objectId: string | null;
  pos: bigint | number | string | null;
  action: ChangeAction | null;
  changedAt: Date | string | null;
}

/** An item's JSON besides its `data` (with the longest type; `data` counts its own bytes and comma). */
const ITEM_FIXED =
  fixedBytes(
    {
      type: "conversation",
      id: "ffffffff-ffff-ffff-ffff-ffffffffffff",
      action: "upsert",
      changedAt: "2026-11-20T08:00:00.000Z",
      data: null,
    },
    0,
  ) - 4;

/**
 * Each type's object as the feed sizes it: the table (alias o) read by the position's object id, its
 * joins, and its ItemSize over those columns (routers/_lib/page-budget.ts).
 */
function objectSizes(tenantId: string): Record<ChangeType, { from: Prisma.Sql; size: ItemSize }> {
  const o: Col = (name) => Prisma.raw(`o."${name}"`);
  const t = Prisma.sql`${tenantId}::uuid`;
  return {
    lead: { from: Prisma.sql`"Lead" o`, size: leadSize(o) },
    contact: { from: Prisma.sql`"Contact" o`, size: contactSize(o) },
    conversation: {
      from: Prisma.sql`"Conversation" o JOIN "Customer" cu ON cu."tenantId" = ${t} AND cu."id" = o."customerId"`,
      // Its row's customer columns read the joined Customer cu, the rest the conversation o.
      size: conversationSize((name) => Prisma.raw(Conversation.sql(name as keyof typeof Conversation.columns, "o"))),
    },
    appointment: { from: Prisma.sql`"Appointment" o`, size: appointmentSize(o) },
    ticket: { from: Prisma.sql`"Ticket" o`, size: ticketSize(tenantId, o) },
  };
}

/**
 * The positions' sizes for budgeted(): ub read once per position, beside it (one index lookup of its
 * object: a UNION ALL whose branches only the position's type passes, a one-time filter); exact only
 * where budgeted() needs it. A `delete` (or an object gone) is `data: null`.
 */
function feedSize(tenantId: string, types: readonly ChangeType[]): { bounds: Prisma.Sql; size: ItemSize } {
  const sizes = objectSizes(tenantId);
  const bounds = Prisma.join(
    types.map(
      (ty) => Prisma.sql`SELECT ${sizes[ty].size.ub} AS "ub" FROM ${sizes[ty].from}
                          WHERE x."type" = ${ty} AND o."tenantId" = ${tenantId}::uuid AND o."id" = x."objectId"`,
    ),
    " UNION ALL ",
  );
  const fixed = Prisma.raw(`${ITEM_FIXED}::bigint`);
  const exact = Prisma.sql`CASE p."type" ${Prisma.join(
    types.map(
      (ty) =>
        Prisma.sql`WHEN ${ty} THEN (SELECT ${sizes[ty].size.exact} FROM ${sizes[ty].from} WHERE o."tenantId" = ${tenantId}::uuid AND o."id" = p."objectId")`,
    ),
    " ",
  )} END`;
  return {
    bounds,
    size: {
      ub: Prisma.sql`(${fixed} + CASE WHEN p."action" = 'delete' THEN 4 ELSE coalesce(p."objUb", 4) END)`,
      exact: Prisma.sql`(${fixed} + CASE WHEN p."action" = 'delete' THEN 4 ELSE coalesce(${exact}, 4) END)`,
    },
  };
}

/**
 * One statement: the tenant's head, whether it has pending changes of these types, and up to
 * limit + 1 positions after the token's (tombstones at or below `skip` left out; from the beginning,
 * `skip` is the head itself). With `unlessPending`, the positions are not read when changes are
 * pending (the caller places them and asks again). Index range scans only: ("tenantId", "pos") for
 * every type, else one ("tenantId", "type", "pos") range per type, merged.
 */
async function readPositions(
  ctx: AuthedContext,
  types: readonly ChangeType[],
  token: SinceToken | undefined,
  limit: number,
  unlessPending: boolean,
) {
  const t = ctx.tenantId;
  const since = token?.pos ?? 0;
  const skip = token ? Prisma.sql`${token.skip}::bigint` : Prisma.sql`h."head"`;
  const gate = unlessPending ? Prisma.sql`AND NOT h."pending"` : Prisma.empty;
  const n = limit + 1;
  const range = (typeCond: Prisma.Sql) => Prisma.sql`
    SELECT "type", "objectId", "pos", "action", "changedAt" FROM "ChangeLog"
     WHERE "tenantId" = ${t}::uuid ${typeCond} AND "pos" > ${since}::bigint
       AND NOT ("action" = 'delete' AND "pos" <= ${skip}) ${gate}
     ORDER BY "pos" LIMIT ${n}`;
  const all = types.length === CHANGE_TYPES.length;
  const positions = all
    ? range(Prisma.empty)
    : Prisma.sql`SELECT * FROM (${Prisma.join(
        types.map((ty) => Prisma.sql`(${range(Prisma.sql`AND "type" = ${ty}`)})`),
        " UNION ALL ",
      )}) u ORDER BY "pos" LIMIT ${n}`;
  const typeFilter = all ? Prisma.empty : Prisma.sql`AND "type" IN (${Prisma.join(types)})`;
  const raw = await readFor(ctx.database, ctx.db, { prepare: true, tenant: t })<RawPosition>(Prisma.sql`
    WITH h AS (
      SELECT COALESCE((SELECT "pos" FROM "ChangeHead" WHERE "tenantId" = ${t}::uuid), 0) AS "head",
             EXISTS (SELECT 1 FROM "ChangeLog" WHERE "tenantId" = ${t}::uuid AND "pos" IS NULL ${typeFilter}) AS "pending")
    SELECT h."head", h."pending", p.* FROM h LEFT JOIN LATERAL (${positions}) p ON true
     ORDER BY p."pos"`);
  const first = raw[0]!;
  const rows: Position[] = raw
    .filter((r) => r.pos !== null)
    .map((r) => ({
      type: r.type!,
      objectId: r.objectId!,
      pos: Number(r.pos),
      action: r.action!,
      changedAt: new Date(r.changedAt!),
    }));
  return { head: Number(first.head ?? 0), pending: first.pending === true, rows };
}

/**
 * The leading positions of `page` whose objects fit the byte budget (at least one), so that only those
 * are loaded: one statement over the positions (given as arrays, in order) summing each one's ub
 * (one lookup of its object; routers/_lib/page-budget.ts) — all of them when that sum fits ("gate");
 * else a second statement, the walk by exact sizes. Nothing for an empty page.
 */
async function sizePositions(ctx: AuthedContext, page: Position[]): Promise<Position[]> {
  if (page.length === 0) return [];
  const present = CHANGE_TYPES.filter((ty) => page.some((r) => r.type === ty));
  const { bounds, size } = feedSize(ctx.tenantId, present);
  const positions = Prisma.sql`
    SELECT x.*, z."ub" AS "objUb"
      FROM unnest(${page.map((r) => r.type)}::text[], ${page.map((r) => r.objectId)}::uuid[], ${page.map((r) => r.action)}::text[])
           WITH ORDINALITY AS x("type", "objectId", "action", "ord")
      LEFT JOIN LATERAL (${bounds}) z ON true`;
  const read = readFor(ctx.database, ctx.db, { prepare: true, tenant: ctx.tenantId });
  const [gate] = await read<{ ubAll: string }>(Prisma.sql`SELECT sum(${size.ub}) AS "ubAll" FROM (${positions}) p`);
  if (Number(gate!.ubAll) <= ctx.pageBudget) return page;
  const walked = await read<{ ord: string }>(
    Prisma.sql`SELECT k."ord" FROM (${budgeted(positions, size, Prisma.sql`"ord"`, { budget: ctx.pageBudget })}) k`,
  );
  return walked.map((r) => page[Number(r.ord) - 1]!).sort((a, b) => a.pos - b.pos);
}

/** The page's loaded objects by type and id. */
type Loaded = Map<ChangeType, Map<string, ChangeItem["data"]>>;

/** The public objects of the page's upserts: one query per type present; a contact now deleted (or a row gone) maps to null. */
async function loadObjects(ctx: AuthedContext, page: Position[]): Promise<Loaded> {
  const ids = new Map<ChangeType, string[]>();
  for (const r of page) {
    if (r.action !== "upsert") continue;
    const list = ids.get(r.type);
    if (list) list.push(r.objectId);
    else ids.set(r.type, [r.objectId]);
  }
  // The same SQL and serializers as each type's list (its select over a source of rows), on the
  // rows of the page's ids; a contact soft-deleted since is not read, so it maps to null (delete).
  const t = ctx.tenantId;
  const read = readFor(ctx.database, ctx.db, { isoTimes: true, tenant: ctx.tenantId });
  const rowsOf = (table: string, type: ChangeType, columns: Prisma.Sql, live = Prisma.empty) => Prisma.sql`
    SELECT ${columns} FROM ${Prisma.raw(`"${table}"`)}
     WHERE "tenantId" = ${t}::uuid AND "id" IN (${Prisma.join(ids.get(type)!.map((id) => Prisma.sql`${id}::uuid`))}) ${live}`;
  const byId = <R extends { id: string }>(rows: R[], serialize: (r: R) => ChangeItem["data"]) =>
    rows.map((r) => [r.id, serialize(r)] as const);
  const all = Prisma.sql`*`;
  const loaders: Record<ChangeType, () => Promise<(readonly [string, ChangeItem["data"]])[]>> = {
    lead: async () => byId(await read<LeadRow>(selectLeads(t, rowsOf("Lead", "lead", Prisma.sql`"id"`))), toLead),
    contact: async () =>
      byId(
        await read<ContactRow>(rowsOf("Contact", "contact", Contact.select(), Prisma.sql`AND "deletedAt" IS NULL`)),
        toContact,
      ),
    conversation: async () =>
      byId(
        await read<ConversationRow>(selectConversations(t, rowsOf("Conversation", "conversation", all))),
        toConversation,
      ),
    appointment: async () =>
      byId(await read<AppointmentRow>(rowsOf("Appointment", "appointment", Appointment.select())), toAppointment),
    ticket: async () =>
      byId(await read<TicketThreadRow>(selectTickets(t, rowsOf("Ticket", "ticket", all))), fromThreadRow),
  };
  const loaded = await Promise.all(
    [...ids.keys()].map(async (type) => [type, new Map(await loaders[type]())] as const),
  );
  return new Map(loaded);
}
