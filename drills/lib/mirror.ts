// A tenant's mirror kept through the changes feed (GET /public/v1/changes, following nextSince as
// client/index.ts followChanges does), for the drills that run writers under a fault, and what they
// compare it with: the resources' own lists, the feed read again from the beginning, and the rows.
import { isDeepStrictEqual } from "node:util";
import type pg from "pg";
import { envelopeProblems, type Client, type Res } from "./http.js";
import { sleep } from "./scope.js";

export type FeedType = "lead" | "contact" | "conversation" | "appointment" | "ticket";
export const PLURAL: Record<FeedType, string> = {
  lead: "leads",
  contact: "contacts",
  conversation: "conversations",
  appointment: "appointments",
  ticket: "tickets",
};

interface ChangeItem {
  type: FeedType;
  id: string;
  action: "upsert" | "delete";
  data: any;
}

/** The drill's key of an object: `type:id`. */
export const keyOf = (type: string, id: string) => `${type}:${id}`;

/**
 * A mirror of one tenant's objects of `types`, kept by applying the feed's pages in order. Every
 * answer is kept (`answers`) for the drill's own checks of answers; `problems` holds what is wrong
 * whatever the fault: a 4xx, a page that is not the feed's shape, an object delivered at a version
 * below one it was delivered at before (the feed keeps commit order).
 */
export class FeedMirror {
  readonly map = new Map<string, any>();
  readonly answers: Res[] = [];
  readonly problems: string[] = [];
  since: string | undefined;
  polls = 0;
  items = 0;
  private running = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly clients: Client[],
    private readonly key: string,
    private readonly types: FeedType[],
  ) {}

  /**
   * Pages until `hasMore` is false (true), or until a page is not a 200 (false: the next drain
   * resumes from the same token, as a client retries).
   */
  async drain(): Promise<boolean> {
    for (let pages = 0; pages < 5_000; pages++) {
      const client = this.clients[this.polls % this.clients.length]!;
      const query = { since: this.since, types: this.types.join(","), limit: 200 };
      const r = await client.request("GET", "/public/v1/changes", { key: this.key, query, timeoutMs: 30_000 });
      this.polls += 1;
      this.answers.push(r);
      if (r.status !== 200) {
        // An outage's 503 (and a request cut by it) is the drill's to judge; anything else is wrong.
        const wrong =
          r.status === 503
            ? envelopeProblems(r, { error: "SERVICE_UNAVAILABLE" })
            : r.status !== 0
              ? [`${r.status} ${r.body?.error ?? r.text.slice(0, 120)}`]
              : [];
        for (const p of wrong) this.problems.push(`changes: ${p}`);
        return false;
      }
      if (!Array.isArray(r.body?.items) || typeof r.body.nextSince !== "string") {
        this.problems.push(`changes: a 200 without items or nextSince: ${r.text.slice(0, 120)}`);
        return false;
      }
      for (const it of r.body.items as ChangeItem[]) this.apply(it);
      this.items += r.body.items.length;
      this.since = r.body.nextSince;
      if (!r.body.hasMore) return true;
    }
    this.problems.push("changes: the feed never ended (5000 pages)");
    return false;
  }

  private apply(it: ChangeItem): void {
    const k = keyOf(it.type, it.id);
    if (it.action === "delete") {
      this.map.delete(k);
      return;
    }
    const had = this.map.get(k)?.version;
    const now = it.data?.version;
    if (typeof had === "number" && typeof now === "number" && now < had && this.problems.length < 50)
      this.problems.push(`changes: ${k} delivered at version ${now} after version ${had}`);
    this.map.set(k, it.data);
  }

  /** Drains every `intervalMs` until stop(), as a mirroring client polls. */
  follow(intervalMs: number): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        await this.drain();
        await sleep(intervalMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/** null when the two maps hold the same keys with deeply equal values; else the first difference. */
export function mapDiff(a: Map<string, unknown>, b: Map<string, unknown>): string | null {
  for (const [k, v] of a) {
    if (!b.has(k)) return `${k} only in the mirror`;
    if (!isDeepStrictEqual(v, b.get(k)))
      return `${k}: mirror ${JSON.stringify(v).slice(0, 160)} vs ${JSON.stringify(b.get(k)).slice(0, 160)}`;
  }
  for (const k of b.keys()) if (!a.has(k)) return `${k} missing from the mirror`;
  return null;
}

/** Every object of `types` through the resources' own lists (offset paging), keyed as the mirror is; or why not. */
export async function listed(client: Client, key: string, types: FeedType[]): Promise<Map<string, unknown> | string> {
  const out = new Map<string, unknown>();
  for (const type of types)
    for (let offset = 0; ; offset += 200) {
      const query = { offset, limit: 200 };
      const r = await client.request("GET", `/public/v1/${PLURAL[type]}`, { key, query, timeoutMs: 30_000 });
      if (r.status !== 200) return `GET /${PLURAL[type]} answered ${r.status} ${r.body?.error ?? ""}`;
      for (const o of r.body.items) out.set(keyOf(type, o.id), o);
      if (!r.body.pagination.hasNext) break;
      if (offset > 100_000) return `GET /${PLURAL[type]}: more than 100000 items`;
    }
  return out;
}

/** The tables of the versioned types, and the rows a live object has (a soft-deleted contact is none). */
const TABLES: Partial<Record<FeedType, { table: string; live: string }>> = {
  lead: { table: "Lead", live: "true" },
  contact: { table: "Contact", live: `"deletedAt" IS NULL` },
  ticket: { table: "Ticket", live: "true" },
  appointment: { table: "Appointment", live: "true" },
};

/**
 * The mirror against the tenant's rows: the same live objects, each at the version (and external
 * id) the database holds now. Only the versioned types (lead, contact, ticket, appointment).
 */
export async function rowsDiff(
  db: pg.Client,
  tenantId: string,
  mirror: Map<string, any>,
  types: FeedType[],
): Promise<string | null> {
  const rows = new Map<string, { version: number; externalId: string | null }>();
  for (const type of types) {
    const t = TABLES[type];
    if (!t) throw new Error(`rowsDiff: ${type} has no version`);
    const ext = type === "appointment" ? `NULL::text` : `"externalId"`;
    const sql = `SELECT "id", "version", ${ext} AS "externalId" FROM "${t.table}" WHERE "tenantId" = $1 AND ${t.live}`;
    const r = await db.query(sql, [tenantId]);
    for (const row of r.rows) rows.set(keyOf(type, row.id), { version: row.version, externalId: row.externalId });
  }
  const mirrored = [...mirror].filter(([k]) => types.some((t) => k.startsWith(`${t}:`)));
  for (const [k, data] of mirrored) {
    const row = rows.get(k);
    if (!row) return `${k} is in the mirror, not in the database`;
    if (data?.version !== row.version) return `${k}: version ${data?.version} mirrored, ${row.version} stored`;
    if (!k.startsWith("appointment:") && (data?.externalId ?? null) !== row.externalId)
      return `${k}: externalId ${JSON.stringify(data?.externalId)} mirrored, ${JSON.stringify(row.externalId)} stored`;
  }
  const inMirror = new Set(mirrored.map(([k]) => k));
  for (const k of rows.keys()) if (!inMirror.has(k)) return `${k} is in the database, not in the mirror`;
  return null;
}
