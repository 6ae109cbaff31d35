// A tenant's mirror kept through the changes feed (GET /public/v1/changes, following nextSince as
// client/index.ts followChanges does), for the drills that run writers under a fault, and what they
// compare it with: the resources' own lists, the feed read again from the beginning, and the rows.
import http from "node:http";
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
    /** Long-poll: each request waits up to this many seconds for a change (GET /changes?wait). */
    private readonly waitS = 0,
  ) {}

  /**
   * Pages until `hasMore` is false (true), or until a page is not a 200 (false: the next drain
   * resumes from the same token, as a client retries).
   */
  async drain(waitS = this.waitS): Promise<boolean> {
    for (let pages = 0; pages < 5_000; pages++) {
      const client = this.clients[this.polls % this.clients.length]!;
      const query = { since: this.since, types: this.types.join(","), limit: 200, ...(waitS ? { wait: waitS } : {}) };
      const r = await client.request("GET", "/public/v1/changes", {
        key: this.key,
        query,
        timeoutMs: 30_000 + waitS * 1000,
      });
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
      for (const it of r.body.items as ChangeItem[]) this.apply(it, this.map, this.problems);
      this.items += r.body.items.length;
      this.since = r.body.nextSince;
      if (!r.body.hasMore) return true;
    }
    this.problems.push("changes: the feed never ended (5000 pages)");
    return false;
  }

  private apply(it: ChangeItem, map: Map<string, any>, problems: string[]): void {
    applyChange(it, map, problems);
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

/** One item of the feed applied to a mirror; an object delivered below a version it was delivered at is a problem. */
function applyChange(it: ChangeItem, map: Map<string, any>, problems: string[]): void {
  const k = keyOf(it.type, it.id);
  if (it.action === "delete") {
    map.delete(k);
    return;
  }
  const had = map.get(k)?.version;
  const now = it.data?.version;
  if (typeof had === "number" && typeof now === "number" && now < had && problems.length < 50)
    problems.push(`changes: ${k} delivered at version ${now} after version ${had}`);
  map.set(k, it.data);
}

/**
 * A tenant's mirror kept through the tRPC subscription changes.subscribe (server-sent events, the
 * wire format httpSubscriptionLink reads): one stream at a time, on the instances in turn; when a
 * stream ends (its instance killed, stopping, a refusal) it reconnects to the next instance with the
 * last event's id as `lastEventId`, as httpSubscriptionLink does. `problems`: an event that is not a
 * page tracked by its nextSince, a version going back; `deliveries` counts each object's deliveries
 * (an object written once is delivered once: a resumed stream repeats nothing).
 */
export class StreamMirror {
  readonly map = new Map<string, any>();
  readonly problems: string[] = [];
  readonly deliveries = new Map<string, number>();
  lastEventId: string | undefined;
  events = 0;
  reconnects = 0;
  private running = false;
  private current: http.ClientRequest | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly bases: string[],
    private readonly key: string,
    private readonly types: FeedType[],
  ) {}

  start(): void {
    this.running = true;
    this.loop = (async () => {
      for (let n = 0; this.running; n++) {
        await this.stream(this.bases[n % this.bases.length]!);
        if (!this.running) break;
        this.reconnects += 1;
        await sleep(200);
      }
    })();
  }

  /** One stream until it ends. */
  private stream(base: string): Promise<void> {
    const url = new URL(`${base}/trpc/changes.subscribe`);
    const input = { types: this.types, ...(this.lastEventId ? { lastEventId: this.lastEventId } : {}) };
    url.searchParams.set("input", JSON.stringify(input));
    return new Promise<void>((resolve) => {
      const req = http.get(url, { headers: { "X-API-Key": this.key, Accept: "text/event-stream" } }, (res) => {
        if (res.statusCode !== 200) {
          if (res.statusCode !== 503) this.problems.push(`subscription: HTTP ${res.statusCode}`);
          res.resume();
          res.on("end", resolve);
          return;
        }
        res.setEncoding("utf8");
        let buf = "";
        res.on("data", (chunk: string) => {
          buf += chunk;
          for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
            this.event(buf.slice(0, i));
            buf = buf.slice(i + 2);
          }
        });
        res.on("end", resolve);
        res.on("error", () => resolve());
      });
      req.on("error", () => resolve());
      this.current = req;
    });
  }

  private event(text: string): void {
    const kind = /^event: ?(.*)$/m.exec(text)?.[1];
    const id = /^id: ?(.*)$/m.exec(text)?.[1];
    const data = /^data: ?(.*)$/m.exec(text)?.[1];
    if (kind === "serialized-error") {
      // An instance stopping or a refusal past the caps ends the stream: the loop reconnects.
      if (!/SERVICE_UNAVAILABLE/.test(data ?? "") && this.problems.length < 50)
        this.problems.push(`subscription: error event ${data?.slice(0, 200)}`);
      return;
    }
    if (kind || !data || id === undefined) return; // connected, ping, return
    let page: { items?: ChangeItem[]; nextSince?: string };
    try {
      page = JSON.parse(data);
    } catch {
      this.problems.push(`subscription: an event that is not JSON: ${data.slice(0, 120)}`);
      return;
    }
    if (!Array.isArray(page.items) || page.nextSince !== id) {
      this.problems.push(`subscription: an event that is not a page tracked by its nextSince: ${data.slice(0, 120)}`);
      return;
    }
    for (const it of page.items) {
      applyChange(it, this.map, this.problems);
      const k = keyOf(it.type, it.id);
      this.deliveries.set(k, (this.deliveries.get(k) ?? 0) + 1);
    }
    this.events += 1;
    this.lastEventId = id;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.current?.destroy();
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
