// Exact list totals at a cost independent of the tenant's size, and deep offsets at the cost of a first
// page (issue 13; docs/architecture.md, "List totals"). The counters are kept by the "ListCounter_apply"
// trigger (prisma/functions/ListCounter_apply.sql); this module only reads them. Every list answers
// with ONE SQL statement built by listStatement(): the total and the page come from one snapshot.
import { Prisma } from "../../generated/prisma/client.js";
import { ownedSql } from "./tenant.js";
import { LRUCache } from "lru-cache";
import type { Database, Db } from "../../server/db/client.js";
import { readFor } from "../../server/db/insert.js";

import { isCounted, isCountedList, type ListEntity } from "./counters.js";
export type { ListEntity } from "./counters.js";

/**
 * From this offset on, a page of an unfiltered list (or of a lead date range) is found through the UTC
 * day buckets ("ListCounter_seek": a few dozen counter rows) instead of by skipping `offset` rows.
 */
export const DEEP_OFFSET = 500;

/** SQL: the exact count of a counter key — the unfiltered list (dim "all") or one equality filter. */
export function counted(tenantId: string, entity: ListEntity, dim = "all", value = ""): Prisma.Sql {
  return Prisma.sql`(SELECT coalesce(sum(c."n"), 0) FROM "ListCounter" c
    WHERE c."tenantId" = ${tenantId}::uuid AND c."entity" = ${entity} AND c."dim" = ${dim} AND c."value" = ${value})`;
}

/**
 * SQL: the count of the filter `dim` (on `column`) at `value`, when the registry (counters.ts) says a
 * counter holds it; else undefined (the total is then a count of the rows).
 */
export function counter(
  tenantId: string,
  entity: ListEntity,
  dim: string,
  column: string,
  value: string,
): Prisma.Sql | undefined {
  return isCounted(entity, dim, column) ? counted(tenantId, entity, dim, value) : undefined;
}

/**
 * SQL: the sum of the counters of the filter `dim` (on `column`) over a set of values (`values`: a
 * subquery of text), when the registry says a counter holds it; else undefined.
 */
export function countedAny(
  tenantId: string,
  entity: ListEntity,
  dim: string,
  column: string,
  values: Prisma.Sql,
): Prisma.Sql | undefined {
  if (!isCounted(entity, dim, column)) return undefined;
  return Prisma.sql`(SELECT coalesce(sum(c."n"), 0) FROM "ListCounter" c
    WHERE c."tenantId" = ${tenantId}::uuid AND c."entity" = ${entity} AND c."dim" = ${dim} AND c."value" IN (${values}))`;
}

/**
 * SQL: epoch milliseconds (a bigint expression) as a timestamptz, exact for every instant: ISO text
 * needs a 4-digit year, which an instant derived from an input may not have (the contacts cursor's
 * "1 ms later" at 9999-12-31T23:59:59.999Z). Whole seconds and milliseconds are added separately
 * (bigint division and remainder, both truncating toward zero, so they add up for instants before
 * 1970 too): one float of microseconds since 1970 is inexact beyond 2^53 µs (about year 2255).
 */
const fromMs = (ms: Prisma.Sql) =>
  Prisma.sql`(timestamptz 'epoch' + (${ms} / 1000) * interval '1 second' + (${ms} % 1000) * interval '1 millisecond')`;

/** A Date as a SQL timestamptz, exact for every Date (fromMs). */
export function sqlTime(d: Date): Prisma.Sql {
  return fromMs(Prisma.sql`${d.getTime()}::bigint`);
}

/** A list filter: its SQL condition and, when a counter holds its count, that count's SQL. */
export interface Filter {
  cond: Prisma.Sql;
  counter?: Prisma.Sql;
}

/**
 * An equality filter on `column` (SQL type `type`), counted by the counter (entity, dim, value) when the
 * registry (counters.ts) has it.
 */
export function eq(
  tenantId: string,
  entity: ListEntity,
  dim: string,
  column: string,
  value: string,
  type: string,
): Filter {
  return {
    cond: Prisma.sql`${Prisma.raw(`"${column}"`)} = ${value}::${Prisma.raw(`"${type}"`)}`,
    counter: counter(tenantId, entity, dim, column, value),
  };
}

/**
 * The WHERE conditions of a list: its tenant, the conditions every row of the list meets (`always`,
 * which its counters respect too: live contacts) and every filter.
 */
export function whereOf(tenantId: string, filters: Filter[], always: Prisma.Sql[] = []): Prisma.Sql {
  return Prisma.join([ownedSql({ tenantId }), ...always, ...filters.map((f) => f.cond)], " AND ");
}

/**
 * The exact total of a list: the unfiltered counter, the counter of its only filter, or else (combined
 * filters, a filter without a counter) a count of the matching rows over the best index.
 */
export function exactTotal(
  tenantId: string,
  entity: ListEntity,
  filters: Filter[],
  always: Prisma.Sql[] = [],
): Prisma.Sql {
  if (filters.length === 0 && isCountedList(entity)) return counted(tenantId, entity);
  if (filters.length === 1 && filters[0]!.counter) return filters[0]!.counter;
  return Prisma.sql`SELECT count(*) FROM ${Prisma.raw(`"${entity}"`)} WHERE ${whereOf(tenantId, filters, always)}`;
}

/**
 * The count cache of one database keeps at most this many (tenant, filter) counts, and at most
 * COUNT_CACHE_BYTES of them (an entry: its key — a tenant id, a search of at most 200 characters, a
 * list id — as UTF-16, plus ~100 bytes for the version, the count and the cache's bookkeeping).
 */
export const COUNT_CACHE_ENTRIES = 10_000;
export const COUNT_CACHE_BYTES = 4 * 1024 * 1024;

interface CachedCount {
  version: string;
  total: number;
  /** The matches' span of the order column, in epoch milliseconds (text), or null without matches. */
  oldest: string | null;
  newest: string | null;
}

/** One count cache per open database (tests open several databases in one process). */
const countCaches = new WeakMap<Database, LRUCache<string, CachedCount>>();

function countCache(db: Database): LRUCache<string, CachedCount> {
  let cache = countCaches.get(db);
  if (!cache) {
    cache = new LRUCache<string, CachedCount>({
      max: COUNT_CACHE_ENTRIES,
      maxSize: COUNT_CACHE_BYTES,
      sizeCalculation: (_v, key) => key.length * 2 + 100,
    });
    countCaches.set(db, cache);
  }
  return cache;
}

/** SQL: an instant as epoch milliseconds (exact: extract() is numeric, the column has millisecond precision). */
const toMs = (t: Prisma.Sql) => Prisma.sql`(extract(epoch FROM ${t}) * 1000)::bigint::text`;

/**
 * A total that is a count of matching rows (a contact search), cached per database under the tenant,
 * the filter (`key`) and the contacts' version: the counter key (Contact, 'v', '') that every write
 * which can change a search's matches moves in its own transaction, and that only grows (migrations
 * 20261125000000_contact_version, 20261126000000_contact_version_created). A count is exact for every
 * snapshot that reads the version it was taken at. So:
 * - with an entry, the statement carries the cached count as a constant and reads the version in its
 *   own snapshot (`extra`): if that is the entry's version, the total is exact for the page it came
 *   with, and the count is neither run nor even planned (planning three ILIKEs costs ~0.6 ms);
 * - otherwise (no entry, or a write moved the version since) the statement counts, and the count is
 *   kept under the version read beside it. After a version change that is a second statement.
 * Repeating a search (paging through it, a dashboard's refresh) then costs its page, not its matches,
 * until a contact write of the tenant moves the version.
 *
 * The scan that counts also takes the matches' span of the order column (min and max: free beside a
 * count that reads every match's row anyway), kept with the count under the same version. `span` is
 * the condition "the order column lies in that span", which every match meets: a page that walks the
 * order column's index testing row after row (the contact search's walk) seeks to the newest match and
 * stops at the oldest, instead of testing the newer and older non-matches. A search whose matches are
 * old ("600 012 345", a customer of two years ago) then walks from its matches, not from the contacts
 * created since. Exact for the same reason as the count: the version moves with every write that can
 * change a match's createdAt.
 */
export class CachedTotal {
  private readonly cache: LRUCache<string, CachedCount>;
  private readonly at: string;
  private hit: CachedCount | undefined;
  private readonly version: Prisma.Sql;

  /**
   * `where`: the list's conditions (tenant, live rows, filters) over the best index for counting them;
   * `column`: the order column whose span is kept.
   */
  constructor(
    db: Database,
    tenantId: string,
    private readonly entity: "Contact",
    key: string,
    private readonly where: Prisma.Sql,
    private readonly column = "createdAt",
  ) {
    this.cache = countCache(db);
    this.at = `${tenantId}\u0000${entity}\u0000${key}`;
    this.hit = this.cache.get(this.at);
    this.version = Prisma.sql`, (${counted(tenantId, entity, "v")})::text AS "countVersion"`;
  }

  /** The total, for listStatement(): the cached count as a constant, or the count of `from`. */
  get total(): Prisma.Sql {
    return this.hit ? Prisma.sql`${this.hit.total}::bigint` : Prisma.sql`m."n"`;
  }

  /** listStatement()'s `from`: without a cached count, the scan (alias m) that counts and takes the span. */
  get from(): Prisma.Sql | undefined {
    if (this.hit) return undefined;
    const col = Prisma.raw(`"${this.column}"`);
    return Prisma.sql`(SELECT count(*) AS "n", min(${col}) AS "oldest", max(${col}) AS "newest"
      FROM ${Prisma.raw(`"${this.entity}"`)} WHERE ${this.where}) m`;
  }

  /** The version the statement read (settle() checks it); with a count, also the span it keeps (epoch ms) and the page reads. */
  get extra(): Prisma.Sql {
    if (this.hit) return this.version;
    return Prisma.sql`${this.version}, ${toMs(Prisma.sql`m."oldest"`)} AS "countOldest", ${toMs(Prisma.sql`m."newest"`)} AS "countNewest",
      m."oldest" AS "spanOldest", m."newest" AS "spanNewest"`;
  }

  /**
   * The matches' span as a condition on the order column, for a page inside listStatement():
   * `column BETWEEN oldest AND newest`, an index condition of a walk down that column. Constants with
   * a cached count (planned like any bound, the statement's shape otherwise unchanged); else s's
   * columns, taken by the count.
   */
  get span(): Prisma.Sql {
    const col = Prisma.raw(`"${this.column}"`);
    if (!this.hit) return Prisma.sql`${col} BETWEEN s."spanOldest" AND s."spanNewest"`;
    const { oldest, newest } = this.hit;
    if (oldest === null || newest === null) return Prisma.sql`false`;
    return Prisma.sql`${col} BETWEEN ${fromMs(Prisma.sql`${oldest}::bigint`)} AND ${fromMs(Prisma.sql`${newest}::bigint`)}`;
  }

  /**
   * Called with the statement's first row: true when its total is exact (a cached count read at its
   * version, or a count, which is then kept with its span); false when the version has moved: run the
   * statement again, now with the count (`from`).
   */
  settle(row: {
    total: number;
    countVersion?: string;
    countOldest?: string | null;
    countNewest?: string | null;
  }): boolean {
    const version = String(row.countVersion);
    if (this.hit) {
      if (version === this.hit.version) return true;
      this.hit = undefined;
      return false;
    }
    this.cache.set(this.at, {
      version,
      total: row.total,
      oldest: row.countOldest ?? null,
      newest: row.countNewest ?? null,
    });
    return true;
  }
}

/** A walk through a list's buckets: the rows whose order column lies in [lo, hi) (unbounded when absent). */
export interface Seek {
  entity: ListEntity;
  /** The order column, as the page's SQL names it (e.g. `"createdAt"`). */
  column: Prisma.Sql;
  desc: boolean;
  lo?: Date;
  hi?: Date;
}

/** SQL: "ListCounter_seek" for a seek at `offset` (NULL: the total only). */
function seekCall(tenantId: string, s: Seek, offset: number | null): Prisma.Sql {
  const ts = (d?: Date) => (d ? sqlTime(d) : Prisma.sql`NULL::timestamptz`);
  return Prisma.sql`"ListCounter_seek"(${tenantId}::uuid, ${s.entity}, ${ts(s.lo)}, ${ts(s.hi)}, ${offset}::bigint, ${s.desc})`;
}

/** SQL: the exact number of rows of a bucket range (year, month and day counters plus the two partial days). */
export function countedRange(tenantId: string, s: Seek): Prisma.Sql {
  return Prisma.sql`(SELECT k."total" FROM ${seekCall(tenantId, s, null)} k)`;
}

export interface ListStatement {
  tenantId: string;
  offset: number;
  /** The exact total (a counter or an index count). With a deep seek, the seek's own total is used. */
  total: Prisma.Sql;
  /** When the list can be walked through its buckets (its only filter is a range of the order column). */
  seek?: Seek;
  /** Extra columns computed once next to the total, e.g. Prisma.sql`, (SELECT max(…) FROM …) AS "newest"`. */
  extra?: Prisma.Sql;
  /** A FROM item of s that the total and the extras may read (CachedTotal's `from`: a count and its span in one scan). */
  from?: Prisma.Sql;
  /**
   * The page: a SELECT of the rows (alias-free columns) that must add `where` to its conditions and end
   * with `ORDER BY … LIMIT … OFFSET ${offset}` — `where` and `offset` place it on the right rows.
   */
  page: (at: { where: Prisma.Sql; offset: Prisma.Sql }) => Prisma.Sql;
  /** ORDER BY of the outer statement over the page's columns (alias p), e.g. Prisma.sql`p."createdAt" DESC, p."id" DESC`. */
  order: Prisma.Sql;
}

/**
 * ONE statement: s (total and extras) LEFT JOIN LATERAL the page. s is fenced (OFFSET 0): a page that
 * reads s's columns (the contact search's gate on "total") would otherwise get s's subqueries inlined
 * at each reference, each planned (and the version read) again. Every row carries "total"; when
 * the page is empty a single row of NULL columns carries it. A deep offset of a seekable list
 * starts the page at the bucket that holds row number `offset` and skips only inside that day.
 */
export function listStatement(l: ListStatement): Prisma.Sql {
  const extra = l.extra ?? Prisma.empty;
  if (l.seek && l.offset >= DEEP_OFFSET) {
    const before = l.seek.desc ? Prisma.sql`${l.seek.column} < s."bound"` : Prisma.sql`${l.seek.column} >= s."bound"`;
    return Prisma.sql`
      SELECT s.*, p.*
        FROM (SELECT k."total"::int AS "total", k."bound", k."skip" ${extra} FROM ${seekCall(l.tenantId, l.seek, l.offset)} k) s
        LEFT JOIN LATERAL (${l.page({ where: before, offset: Prisma.sql`s."skip"` })}) p ON true
       ORDER BY ${l.order}`;
  }
  return Prisma.sql`
    SELECT s.*, p.*
      FROM (SELECT (${l.total})::int AS "total" ${extra} ${l.from ? Prisma.sql`FROM ${l.from}` : Prisma.empty} OFFSET 0) s
      LEFT JOIN LATERAL (${l.page({ where: Prisma.sql`true`, offset: Prisma.sql`${l.offset}` })}) p ON true
     ORDER BY ${l.order}`;
}

/** The rows of a listStatement(): page rows of type R (or one row of NULLs), each with the total and the extras M. */
export type ListRows<R, M = object> = ((R | { [K in keyof R]: null }) & { total: number } & M)[];

/**
 * Runs a listStatement() where the procedure's queries run: outside a transaction on the pool's raw
 * runner, not through Prisma's $queryRaw (server/db/insert.ts readFor: ~0.7 ms of CPU less per
 * 50-row page). The statement is the same Prisma.sql, with the same bound parameters. Its instants
 * come back as ISO strings on either (server/db/insert.ts readFor with isoTimes): the rows are the
 * row types of model/ (RowOf), whichever runner read them.
 */
export function listRows<R, M = object>(
  ctx: { database: Database; db: Db; tenantId: string },
  statement: Prisma.Sql,
  opts: { prepare?: boolean } = {},
): Promise<ListRows<R, M>> {
  return readFor(ctx.database, ctx.db, { isoTimes: true, prepare: opts.prepare ?? true, tenant: ctx.tenantId })<
    ListRows<R, M>[number]
  >(statement);
}

/** The total, the extras and the page's rows of a listStatement() result. */
export function splitList<R extends { id: string }, M = object>(
  rows: ListRows<R, M>,
): { total: number; extra: M; items: R[] } {
  const first = rows[0]!;
  return { total: first.total, extra: first, items: rows.filter((r) => r.id !== null) as unknown as R[] };
}

/** A json column of rows (json_agg): parsed by some drivers, a string with others. */
export function jsonRows<T>(v: unknown): T[] {
  return (typeof v === "string" ? JSON.parse(v) : v) as T[];
}
