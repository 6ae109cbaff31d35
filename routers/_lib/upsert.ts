// Upsert by external id, one object (PUT /public/v1/{leads|contacts|tickets}/by-external-id/{externalId})
// and in batches (POST /public/v1/{leads|contacts|tickets}/batch/upsert): the one mechanism both
// use, over a resource's `UpsertResource` (its find, its POST's create, its PATCH's update).
//
// One object, inside one transaction (the Idempotency-Key's, routers/_lib/idempotent.ts):
//   1. the object holding the external id (a soft-deleted contact still holds it: 409 naming it);
//   2. none: If-Match given → 412 (there is no version to match); else created exactly as POST
//      creates it, inside a savepoint. A concurrent upsert of the same external id that committed
//      first makes the unique index refuse this row: back to the savepoint, and on as an update of
//      the row it committed (so concurrent upserts create one object between them);
//   3. one: the resource's update — its 404s, a field PATCH may not change that differs (422
//      naming it), If-Match (412), then the PATCH-able fields that differ, in one guarded UPDATE;
//      nothing differs → "unchanged", nothing written (no version, no change in the feed).
// A batch runs its items in order in one transaction, each inside its own savepoint: a failed item
// is rolled back to it (it changes nothing) and answers its own envelope; the others commit
// together with the batch's Idempotency-Key record, which replays the whole answer.
// Work is bounded by the answer: the writes decide on the objects' own columns, and the answers'
// objects are built last (`present`), only for the results within the page byte budget (a ticket's
// thread is read in one statement for those alone); an Idempotency-Key's record keeps them compact
// (`record`: a ticket as its columns and its thread's length) and within RECORD_MAX_BYTES.
import { z } from "zod";
import type { OpenApiMeta } from "trpc-to-openapi";
import { dbViolation, isUniqueViolation } from "../../server/db/errors.js";
import { AppError, toAppError, validation, zodDetails } from "../../server/errors.js";
import { RECORD_MAX_BYTES, storedText } from "../../server/idempotency.js";
import { idempotencyKeyOf, idempotent, type ResponseRecord } from "./idempotent.js";
import { ITEMS_BUDGET_BYTES } from "./page-budget.js";
import {
  checkVersion,
  ExternalId,
  headerNotApplicable,
  isExternalIdTaken,
  nameHolder,
  preconditionOf,
  VersionNumber,
  type EntityTags,
  type SyncedTable,
} from "./sync.js";
import type { AuthedContext } from "../trpc.js";
import { Prisma } from "../../generated/prisma/client.js";

export type UpsertStatus = "created" | "updated" | "unchanged";

export interface Upserted<O> {
  status: UpsertStatus;
  item: O;
}

/**
 * How an Idempotency-Key record keeps a resource's public objects (default: as they are): `store`
 * one object compactly, `rebuild` the identical objects of many stored ones (in one statement).
 */
export interface ItemRecord<P> {
  store(item: P): unknown;
  rebuild(ctx: AuthedContext, stored: unknown[]): Promise<P[]>;
}

/**
 * What the upserts need of a resource. `B` is the PUT body (the create body without externalId), `R`
 * the stored row, `O` what a write gives, `P` the public object the answer carries (`present` makes
 * P of O; without it, O is P).
 */
export interface UpsertResource<
  B,
  R extends { id: string; version: number; externalId: string | null },
  O extends { id: string },
  P extends { id: string } = O,
> {
  table: SyncedTable;
  /** The public name ("leads"), for paths and messages. */
  plural: string;
  /** An item: `externalId` and the PUT body's fields (the PUT's input, its external id from the path; a batch's item). */
  item: z.ZodType<B & { externalId: string }>;
  /**
   * The tenant's objects holding these external ids (a soft-deleted contact included), in one
   * statement: a PUT reads its one, a batch its items' all at once.
   */
  find(ctx: AuthedContext, externalIds: string[]): Promise<R[]>;
  /** POST's create, with the external id. */
  create(ctx: AuthedContext, body: B, externalId: string): Promise<O>;
  /**
   * PATCH's update of `row` by `body`: its 404s, 422 for a field PATCH may not change that differs,
   * `checkVersion(pre, …)`, then the fields that differ. Null: nothing differs, nothing written.
   */
  update(ctx: AuthedContext, row: R, body: B, pre: EntityTags | undefined): Promise<O | null>;
  toPublic(row: R): O;
  /**
   * Optional, one statement: the update of the object holding the external id when it is live, its
   * create-only fields equal, If-Match (when given) names its version and some PATCH-able field
   * differs; undefined when any of that does not hold (the general path then answers).
   */
  fastUpdate?(ctx: AuthedContext, externalId: string, body: B, pre: EntityTags | undefined): Promise<O | undefined>;
  /**
   * Optional, one statement: a batch's new items created together as each item's POST would create
   * it, skipping any row a unique index refuses (ON CONFLICT DO NOTHING); the created ones by index.
   * An item it cannot create (a refused row, an input its create would refuse) is left out, and the
   * per-item path answers for it.
   */
  createMany?(ctx: AuthedContext, items: { index: number; externalId: string; body: B }[]): Promise<Map<number, O>>;
  /**
   * The public objects of written ones, in order, within `budget` bytes of JSON: the longest prefix
   * that fits (the first always comes), null past it. Default (O is P): each object's JSON counted.
   */
  present?(ctx: AuthedContext, items: O[], budget: number): Promise<(P | null)[]>;
  /** How a stored answer keeps P (default: as it is). */
  record?: ItemRecord<P>;
}

/** An item's JSON bytes, with its separating comma. */
const jsonBytes = (item: unknown) => Buffer.byteLength(JSON.stringify(item)) + 1;

/** The objects within `budget` bytes, in order (the longest prefix; the first always): serializes no more than one past it. */
export function withinBudget<P>(items: P[], budget: number): (P | null)[] {
  if (!Number.isFinite(budget)) return items;
  let bytes = 0;
  let full = false;
  return items.map((item, i) => {
    if (!full) {
      bytes += jsonBytes(item);
      if (bytes <= budget || i === 0) return item;
    }
    full = true;
    return null;
  });
}

/** The resource's `present`, or its default. */
function presentOf<
  B,
  R extends { id: string; version: number; externalId: string | null },
  O extends { id: string },
  P extends { id: string },
>(res: UpsertResource<B, R, O, P>) {
  return (
    res.present ??
    (async (_ctx: AuthedContext, items: O[], budget: number) => withinBudget(items as unknown as P[], budget))
  );
}

/** An id as stored (lower case), null for null or absent. */
export const storedId = (id: string | null | undefined) => (typeof id === "string" ? id.toLowerCase() : (id ?? null));

/** A field an update may not change, given with another value than the stored one: 422 naming it. */
export function mayNotChange(fields: string[]) {
  return validation("Request validation failed", {
    fields: fields.map((field) => ({
      field,
      code: "immutable",
      message: "differs from the stored value, and an update may not change it",
    })),
    fieldCount: fields.length,
    truncated: false,
  });
}

/**
 * A resource's create-only fields (its write model): for each, whether a value a PUT body gives names
 * what the stored row holds (an id in any case, a phone after normalisation …).
 */
export type CreateOnly<B, R> = {
  readonly [K in keyof B]?: (given: Exclude<B[K], undefined>, row: R, ctx: AuthedContext, body: B) => boolean;
};

/** The create-only fields a PUT body gives with another value than the stored row's: PUT's 422 when any. */
export function differingCreateOnly<B extends object, R>(
  rules: CreateOnly<B, R>,
  ctx: AuthedContext,
  row: R,
  body: B,
): string[] {
  const given = body as Record<string, unknown>;
  return Object.entries(rules as Record<string, (v: unknown, r: R, c: AuthedContext, b: B) => boolean>)
    .filter(([field, same]) => given[field] !== undefined && !same(given[field], row, ctx, body))
    .map(([field]) => field);
}

const savepoint = (
  ctx: AuthedContext,
  verb: "SAVEPOINT" | "RELEASE SAVEPOINT" | "ROLLBACK TO SAVEPOINT",
  name: string,
) => ctx.db.$executeRaw(Prisma.sql`${Prisma.raw(`${verb} ${name}`)}`);

/**
 * A create refused by a unique index (the raw violation, or the create's own 409): maybe because a
 * concurrent upsert of the same external id committed first, whichever of the object's unique
 * indexes (its external id, a contact's phone or email) refused the row first.
 */
const refusedAsDuplicate = (err: unknown, table: SyncedTable) =>
  isExternalIdTaken(err, table) || isUniqueViolation(err) || (err instanceof AppError && err.code === "ALREADY_EXISTS");

/** A model delegate's methods that only read (a failed read is the database's fault: the batch fails). */
const READ_METHOD = /^(find|count|aggregate|groupBy)/;

/**
 * A batch item's context whose first statement that may write — a model's create, update, upsert or
 * delete, any raw statement — is preceded by SAVEPOINT `name`, so an item that fails rolls back its
 * own writes; an item that only reads (an unchanged object: its row came with the batch's one read)
 * costs no savepoint. `end` releases it, or rolls back to it, when it was taken.
 */
function lazySavepoint(ctx: AuthedContext, name: string) {
  let taken = false;
  const take = async () => {
    if (taken) return;
    taken = true;
    await savepoint(ctx, "SAVEPOINT", name);
  };
  const first =
    <T extends (...args: never[]) => unknown>(fn: T, self: unknown) =>
    async (...args: Parameters<T>) => {
      await take();
      return fn.apply(self, args);
    };
  const db = new Proxy(ctx.db, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof key !== "string") return value;
      if (typeof value === "function")
        return /^\$(executeRaw|queryRaw)/.test(key) ? first(value as () => unknown, target) : value.bind(target);
      if (key.startsWith("$") || value === null || typeof value !== "object") return value;
      // A model's delegate: its writes take the savepoint first.
      return new Proxy(value, {
        get(model, op) {
          const fn: unknown = Reflect.get(model, op, model);
          if (typeof fn !== "function") return fn;
          return typeof op === "string" && !READ_METHOD.test(op) ? first(fn as () => unknown, model) : fn.bind(model);
        },
      });
    },
  });
  return {
    ctx: { ...ctx, db } as AuthedContext,
    end: async (verb: "RELEASE SAVEPOINT" | "ROLLBACK TO SAVEPOINT") => {
      if (taken) await savepoint(ctx, verb, name);
    },
  };
}

/** The object holding `externalId`, or null. */
const findOne = async <R extends { externalId: string | null }>(
  ctx: AuthedContext,
  res: { find(ctx: AuthedContext, externalIds: string[]): Promise<R[]> },
  externalId: string,
): Promise<R | null> => (await res.find(ctx, [externalId]))[0] ?? null;

/**
 * One upsert on ctx.db, which is a transaction (steps 1–3 above). `known`: the object already read
 * (null: none held the external id a moment ago), else it is found here; either way a create that
 * committed since is caught by the unique index, as in step 2. `within`: a savepoint the caller set
 * just before (a batch item's; only reads ran since), which the create falls back to instead of
 * setting one of its own.
 */
export async function upsertOne<
  B,
  R extends { id: string; version: number; externalId: string | null },
  O extends { id: string },
  P extends { id: string },
>(
  ctx: AuthedContext,
  res: UpsertResource<B, R, O, P>,
  externalId: string,
  body: B,
  pre: EntityTags | undefined,
  known?: R | null,
  within?: string,
): Promise<Upserted<O>> {
  let row = known === undefined ? await findOne(ctx, res, externalId) : known;
  if (!row) {
    checkVersion(pre, null);
    const point = within ?? "upsert_create";
    if (!within) await savepoint(ctx, "SAVEPOINT", point);
    try {
      const item = await res.create(ctx, body, externalId);
      if (!within) await savepoint(ctx, "RELEASE SAVEPOINT", point);
      return { status: "created", item };
    } catch (err) {
      if (!refusedAsDuplicate(err, res.table)) throw err;
      // Another upsert of this external id committed first: update what it created. Else the
      // refusal is this create's own (a phone another contact holds): it stands.
      await savepoint(ctx, "ROLLBACK TO SAVEPOINT", point);
      row = await findOne(ctx, res, externalId);
      if (!row) throw err;
    }
  }
  const item = await res.update(ctx, row, body, pre);
  return item ? { status: "updated", item } : { status: "unchanged", item: res.toPublic(row) };
}

/** The PUT's path parameter (its input is the body's schema extended with it; the body itself may not name one). */
export const PathExternalId = { externalId: ExternalId.describe("Your id of the object (URL-encoded in the path)") };

/** PUT's 422 when the body itself names `externalId` (the path names it; the transport took the path's). */
function refuseBodyExternalId(ctx: AuthedContext) {
  // Over /trpc and in-process the input is one object, which names the external id itself.
  if (ctx.request.shadowed?.includes("externalId"))
    throw validation("Request validation failed", {
      fields: [
        {
          field: "externalId",
          code: "unknown_field",
          message: "The external id is the path's; the body may not name it",
        },
      ],
      fieldCount: 1,
      truncated: false,
    });
}

/** An Idempotency-Key record of one upsert's answer: its status and the object in the resource's record form. */
function upsertedRecord<P>(record: ItemRecord<P> | undefined): ResponseRecord<Upserted<P>> | undefined {
  if (!record) return undefined;
  return {
    store: ({ status, item }) => ({ status, item: record.store(item) }),
    rebuild: async (ctx, stored: { status: UpsertStatus; item: unknown }) => ({
      status: stored.status,
      item: (await record.rebuild(ctx, [stored.item]))[0]!,
    }),
  };
}

/**
 * The PUT's resolver: the upsert inside the Idempotency-Key's transaction; 201 with Location when
 * it created, else 200 (a replay answers the status it stored).
 */
export function putResolver<
  B,
  R extends { id: string; version: number; externalId: string | null },
  O extends { id: string },
  P extends { id: string } = O,
>(res: UpsertResource<B, R, O, P>) {
  const present = presentOf(res);
  const answer = async (ctx: AuthedContext, done: Upserted<O>): Promise<Upserted<P>> => {
    const [item] = await present(ctx, [done.item], Infinity);
    return { status: done.status, item: item! };
  };
  const run = (known: R | null | undefined) =>
    idempotent<B & { externalId: string }, Upserted<P>>(
      async ({ ctx, input }) => {
        const { externalId, ...body } = input;
        return answer(ctx, await upsertOne(ctx, res, externalId, body as B, preconditionOf(ctx), known));
      },
      { record: upsertedRecord(res.record) },
    );
  return async (opts: { ctx: AuthedContext; input: B & { externalId: string }; path: string }): Promise<P> => {
    refuseBodyExternalId(opts.ctx);
    const pre = preconditionOf(opts.ctx); // a malformed If-Match is a 422 before anything is read
    let done: Upserted<P> | undefined;
    let known: R | null | undefined;
    if (idempotencyKeyOf(opts.ctx) === undefined) {
      // Without an Idempotency-Key there is no claim to write with the update: an update is PATCH's
      // write (the read, then the resource's one guarded UPDATE on ctx.db, outside a transaction, as
      // PATCH runs). Only a create needs the transaction (step 2's savepoint); it starts from this
      // read (a create committed since is caught by the unique index).
      const { externalId, ...body } = opts.input;
      const fast = await res.fastUpdate?.(opts.ctx, externalId, body as B, pre);
      if (fast) done = await answer(opts.ctx, { status: "updated", item: fast });
      else known = await findOne(opts.ctx, res, externalId);
      if (!done && known) {
        const item = await res.update(opts.ctx, known, body as B, pre);
        done = await answer(
          opts.ctx,
          item ? { status: "updated", item } : { status: "unchanged", item: res.toPublic(known) },
        );
      }
    }
    done ??= await run(known)(opts);
    // REST answers 201 with Location for a create, 200 otherwise (rest/facade.ts).
    opts.ctx.outcome.upserted = done.status;
    return done.item;
  };
}

export const putMeta = (res: {
  plural: string;
  tag: string;
  summary: string;
  description: string;
}): OpenApiMeta["openapi"] & object => ({
  method: "PUT",
  path: `/public/v1/${res.plural}/by-external-id/{externalId}`,
  tags: [res.tag],
  summary: res.summary,
  description: res.description,
  protect: true,
});

// ---- batches ------------------------------------------------------------------------------------

export const BATCH_MAX = 100;

export const BatchInput = z
  .object({
    items: z
      .array(z.unknown())
      .min(1)
      .max(BATCH_MAX)
      .meta({
        description:
          `1 to ${BATCH_MAX} items, each \`{"externalId": ..., ...}\` followed by the fields of the PUT body, and optionally ` +
          "`ifMatch`: the version the object must have (an integer; the item's If-Match)",
      }),
  })
  .strict();

export function batchOutput<T extends z.ZodType>(item: T) {
  const result = z
    .object({
      index: z.number().int().meta({ description: "the item's position in `items`, from 0" }),
      status: z.enum(["created", "updated", "unchanged", "failed"]),
      id: z.string().nullable().meta({
        description: "the object's id; null for a failed item (a 409's `details.existingId` names the holder)",
      }),
      item: item.nullable().meta({
        description:
          "the object as it is now; null for a failed item, and for an item past the page byte budget (read it by id)",
      }),
      error: z
        .object({
          error: z.string(),
          message: z.string(),
          details: z.any().meta({ type: "object", description: "informational context, as in the error envelope" }),
        })
        .nullable()
        .meta({
          description:
            "what this item alone would have answered (the envelope's error, message and details); null unless failed",
        }),
    })
    .strict();
  return z.object({ results: z.array(result) }).strict();
}

type BatchResult<O> = {
  index: number;
  status: UpsertStatus | "failed";
  id: string | null;
  item: O | null;
  error: { error: string; message: string; details: Record<string, unknown> } | null;
};

/** A failure that is the item's own answer (a 4xx); anything else (an outage, a deadlock) fails the batch. */
function itemError(err: unknown): BatchResult<never>["error"] {
  const app = toAppError(err);
  if (app.status >= 500) throw err;
  return { error: app.code, message: app.message, details: inJsonbOrder(app.details) as Record<string, unknown> };
}

/**
 * A value with every object's keys in the order a jsonb value keeps them (shorter keys first, then
 * by their bytes): an item's free-form `details` (no output schema orders them) then reads the same
 * in the first answer and in a replay of its stored record.
 */
function inJsonbOrder(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(inJsonbOrder);
  if (!v || typeof v !== "object") return v;
  const keys = Object.keys(v).sort(
    (a, b) => Buffer.byteLength(a) - Buffer.byteLength(b) || Buffer.compare(Buffer.from(a), Buffer.from(b)),
  );
  return Object.fromEntries(keys.map((k) => [k, inJsonbOrder((v as Record<string, unknown>)[k])]));
}

/** A statement the database refused for a value (class 22 or 23), not an outage. */
const isConstraintRefusal = (err: unknown) => /^2[23]/.test(dbViolation(err)?.sqlState ?? "");

/** The external ids among `ids` that an object of `table` of the caller's tenant holds (one statement). */
/** A batch item: the PUT's input (externalId and the body) and its precondition. */
type Item<B> = B & { externalId: string; ifMatch?: number };
type Parsed<B> = ReturnType<z.ZodType<Item<B>>["safeParse"]>;
type Work<B> = { index: number; externalId: string; body: B; pre: EntityTags | undefined };
/** External-id order: the order in which a batch takes its rows' locks. */
const byExternalId = (x: { externalId: string }, y: { externalId: string }) =>
  x.externalId < y.externalId ? -1 : x.externalId > y.externalId ? 1 : 0;

/** An item's `ifMatch` as the If-Match it stands for. */
const itemPrecondition = (ifMatch: number | undefined): EntityTags | undefined =>
  ifMatch === undefined ? undefined : { any: false, strong: [ifMatch], weak: [] };

/** The batch's item schema: the PUT's input and `ifMatch`. */
function batchItem<B>(item: z.ZodType<B & { externalId: string }>): z.ZodType<Item<B>> {
  const ifMatch = VersionNumber.optional().meta({
    description: "the version the object must have, else this item fails with 412",
  });
  return (item as unknown as z.ZodObject).safeExtend({ ifMatch }) as unknown as z.ZodType<Item<B>>;
}

/**
 * The new items a bulk create may take: first occurrences of an external id without a precondition
 * (an item with `ifMatch` never creates: it goes on its own, to its 412), in external-id order.
 */
function newItems<B>(parsedItems: Parsed<B>[]): Work<B>[] {
  const fresh = new Set<string>();
  const news: Work<B>[] = [];
  for (const [index, p] of parsedItems.entries()) {
    if (!p.success || fresh.has(p.data.externalId)) continue;
    fresh.add(p.data.externalId);
    const { externalId, ifMatch, ...body } = p.data;
    if (ifMatch === undefined) news.push({ index, externalId, body: body as B, pre: undefined });
  }
  return news.sort(byExternalId);
}

/**
 * The resource's one-statement create of the new items on ctx.db (a transaction: inside a savepoint;
 * the root client: a statement on its own). A refusal no item can be told apart by (a check
 * constraint) creates nothing here: every item then goes on its own.
 */
async function bulkCreate<
  B,
  R extends { id: string; version: number; externalId: string | null },
  O extends { id: string },
  P extends { id: string },
>(
  ctx: AuthedContext,
  res: UpsertResource<B, R, O, P>,
  news: Work<B>[],
  inTransaction: boolean,
): Promise<Map<number, O>> {
  const created = new Map<number, O>();
  if (!res.createMany || news.length === 0) return created;
  if (inTransaction) await savepoint(ctx, "SAVEPOINT", "batch_bulk");
  try {
    for (const [i, o] of await res.createMany(ctx, news)) created.set(i, o);
    if (inTransaction) await savepoint(ctx, "RELEASE SAVEPOINT", "batch_bulk");
  } catch (err) {
    if (toAppError(err).status >= 500 && !isConstraintRefusal(err)) throw err;
    if (inTransaction) await savepoint(ctx, "ROLLBACK TO SAVEPOINT", "batch_bulk");
    created.clear();
  }
  return created;
}

/**
 * Every item's result but the writes: failed inputs and repeated external ids (the later of two
 * fails), in the items' order, and the items `created` answers; the rest is the work, in external-id
 * order (two batches sharing external ids take their rows' locks in the same order, so they wait for
 * each other instead of deadlocking).
 */
function planResults<B, O extends { id: string }>(parsedItems: Parsed<B>[], created: Map<number, O>) {
  const out: BatchResult<O>[] = new Array(parsedItems.length);
  const work: Work<B>[] = [];
  const seen = new Set<string>();
  for (const [index, parsed] of parsedItems.entries()) {
    if (!parsed.success) {
      out[index] = {
        index,
        status: "failed",
        id: null,
        item: null,
        error: itemError(new AppError("VALIDATION_ERROR", "Request validation failed", zodDetails(parsed.error))),
      };
      continue;
    }
    const { externalId, ifMatch, ...body } = parsed.data;
    if (seen.has(externalId)) {
      const err = validation("Request validation failed", {
        fields: [
          { field: "externalId", code: "duplicate", message: "An earlier item of this batch has the same externalId" },
        ],
        fieldCount: 1,
        truncated: false,
      });
      out[index] = { index, status: "failed", id: null, item: null, error: itemError(err) };
      continue;
    }
    seen.add(externalId);
    const bulk = created.get(index);
    if (bulk) out[index] = { index, status: "created", id: bulk.id, item: bulk, error: null };
    else work.push({ index, externalId, body: body as B, pre: itemPrecondition(ifMatch) });
  }
  work.sort(byExternalId);
  return { out, work };
}

/**
 * The answer: the public objects of the results within the page byte budget, in the items' order
 * (the longest prefix; past it `item: null`), built by the resource's `present` for those alone.
 */
async function answer<
  B,
  R extends { id: string; version: number; externalId: string | null },
  O extends { id: string },
  P extends { id: string },
>(ctx: AuthedContext, res: UpsertResource<B, R, O, P>, out: BatchResult<O>[]): Promise<BatchResult<P>[]> {
  const written = out.filter((r) => r.item !== null);
  const objects = await presentOf(res)(
    ctx,
    written.map((r) => r.item!),
    ctx.pageBudget ?? ITEMS_BUDGET_BYTES,
  );
  const byIndex = new Map(written.map((r, i) => [r.index, objects[i] ?? null]));
  return out.map((r) => ({ ...r, item: byIndex.get(r.index) ?? null }));
}

/** A batch's stored answer: each object in the resource's record form, rebuilt together (one statement). */
function batchRecord<P>(record: ItemRecord<P> | undefined): ResponseRecord<{ results: BatchResult<P>[] }> | undefined {
  if (!record) return undefined;
  return {
    store: ({ results }) => ({
      results: results.map((r) => ({ ...r, item: r.item === null ? null : record.store(r.item) })),
    }),
    async rebuild(ctx, stored: { results: BatchResult<unknown>[] }) {
      const kept = stored.results.filter((r) => r.item !== null);
      const objects = await record.rebuild(
        ctx,
        kept.map((r) => r.item),
      );
      const byIndex = new Map(kept.map((r, i) => [r.index, objects[i]!]));
      return { results: stored.results.map((r) => ({ ...r, item: byIndex.get(r.index) ?? null })) as BatchResult<P>[] };
    },
  };
}

/**
 * With an Idempotency-Key, the answer's objects kept within what one record may store
 * (RECORD_MAX_BYTES, as stored): the longest prefix whose record fits, `item: null` past it, so the
 * first answer and every replay are the same. Most batches fit whole (a record is deflated); a
 * larger one is cut by bisection over how many objects are kept (at most 8 encodings).
 */
function withinRecord<P>(
  results: BatchResult<P>[],
  record: ResponseRecord<{ results: BatchResult<P>[] }> | undefined,
): BatchResult<P>[] {
  const kept = (n: number) => {
    let seen = 0;
    return results.map((r) => (r.item !== null && seen++ >= n ? { ...r, item: null } : r));
  };
  const fits = (n: number) => Buffer.byteLength(storedText(record, { results: kept(n) })) <= RECORD_MAX_BYTES;
  const objects = results.filter((r) => r.item !== null).length;
  if (fits(objects)) return results;
  let lo = 0;
  let hi = objects - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return kept(lo);
}

/**
 * The batch's resolver: every item in order, each in its own savepoint (see the top of the file).
 * Without an Idempotency-Key (nothing to store with the writes) the new items' bulk create runs first
 * as a statement on its own, outside any transaction (each row it creates is one item, complete); a
 * transaction opens only for what it leaves (updates, unchanged and refused items). With a key,
 * everything runs in the key's transaction, the bulk create inside a savepoint.
 */
export function batchResolver<
  B,
  R extends { id: string; version: number; externalId: string | null },
  O extends { id: string },
  P extends { id: string } = O,
>(res: UpsertResource<B, R, O, P>) {
  const item = batchItem(res.item);
  const record = batchRecord(res.record);
  const inTransaction = (pre?: { parsedItems: Parsed<B>[]; created: Map<number, O> }) =>
    idempotent<{ items: unknown[] }, { results: BatchResult<P>[] }>(
      async ({ ctx, input }) => {
        const parsedItems = pre?.parsedItems ?? input.items.map((raw) => item.safeParse(raw));
        const { out, work } = planResults(
          parsedItems,
          pre?.created ?? (await bulkCreate(ctx, res, newItems(parsedItems), true)),
        );
        // One read for the items left (not bulk-created): the objects holding their external ids. An
        // item whose id none holds goes straight to its create (a create committed since is caught by
        // the unique index, as in step 2).
        const held = new Map(
          work.length
            ? (
                await res.find(
                  ctx,
                  work.map((w) => w.externalId),
                )
              ).map((r) => [r.externalId, r])
            : [],
        );
        for (const { index, externalId, body, pre: ifMatch } of work) {
          const point = lazySavepoint(ctx, "batch_item");
          try {
            const done = await upsertOne(
              point.ctx,
              res,
              externalId,
              body,
              ifMatch,
              held.get(externalId) ?? null,
              "batch_item",
            );
            await point.end("RELEASE SAVEPOINT");
            out[index] = { index, status: done.status, id: done.item.id, item: done.item, error: null };
          } catch (err) {
            if (toAppError(err).status >= 500) throw err; // an outage fails the batch
            await point.end("ROLLBACK TO SAVEPOINT");
            // The holder a 409 names is read once the item's writes are rolled back, before its error is made.
            await nameHolder(err, ctx.db);
            out[index] = { index, status: "failed", id: null, item: null, error: itemError(err) };
          }
        }
        const results = await answer(ctx, res, out);
        return { results: idempotencyKeyOf(ctx) === undefined ? results : withinRecord(results, record) };
      },
      { record },
    );
  const keyed = inTransaction();
  return async (opts: { ctx: AuthedContext; input: { items: unknown[] }; path: string }) => {
    // The batch's items carry their own preconditions (`ifMatch`); a header would apply to none.
    const given = opts.ctx.request;
    if (given.ifMatch || given.problems?.ifMatch)
      throw headerNotApplicable("If-Match", "a batch item carries its own `ifMatch`");
    if (given.ifNoneMatch) throw headerNotApplicable("If-None-Match", "a batch item carries its own `ifMatch`");
    if (!res.createMany || idempotencyKeyOf(opts.ctx) !== undefined) return keyed(opts);
    const parsedItems = opts.input.items.map((raw) => item.safeParse(raw));
    const created = await bulkCreate(opts.ctx, res, newItems(parsedItems), false);
    const { out, work } = planResults(parsedItems, created);
    // Everything answered (a load of new objects): no transaction at all.
    if (work.length === 0) return { results: await answer(opts.ctx, res, out) };
    return inTransaction({ parsedItems, created })(opts);
  };
}

/** The batch operation's OpenAPI meta (its text is the same for the three resources). */
export const batchMeta = (plural: string): OpenApiMeta["openapi"] & object => ({
  method: "POST",
  path: `/public/v1/${plural}/batch/upsert`,
  tags: [plural],
  summary: `Create or update up to ${BATCH_MAX} ${plural} by your external ids`,
  description:
    `\`items\`: 1 to ${BATCH_MAX} objects, each \`externalId\` followed by the fields of PUT /${plural}/by-external-id/{externalId}'s body ` +
    `(more than ${BATCH_MAX} gives 422 before anything is read or written). Each item is upserted as that PUT would, atomically on its own: ` +
    "the answer is 200 with `results` in the items' order, each `created`, `updated`, `unchanged` or `failed` with the error that item " +
    "alone would have answered (a failed item changes nothing). The same externalId twice fails the later item with 422. " +
    "An item may carry `ifMatch`, the version its object must have (an integer, as the PUT's `If-Match`): another version fails the item " +
    "with 412 and `details.currentVersion`, and so does an item no object holds yet (`currentVersion: null`). An `If-Match` or " +
    "`If-None-Match` header on a batch gives 422. " +
    "The batch counts as one request against the quotas; `Idempotency-Key` replays the whole answer. The answer's objects stop at the " +
    "page byte budget, in the items' order (past it, `item: null`: read it by id); with an `Idempotency-Key` also where the stored " +
    "answer reaches its 64 KiB record.",
  protect: true,
});
