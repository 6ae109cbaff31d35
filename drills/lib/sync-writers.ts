// Two-way sync writers for an outage drill: PUT /public/v1/{leads,contacts,tickets}/by-external-id/{id}
// and POST /public/v1/{…}/batch/upsert, as an integrator's sync sends them, each write a value of its
// own (a lead's notes, a contact's fullName, a ticket's subject). Lanes write external ids of their
// own, one write at a time per id, so that which acknowledged write is the last is known; some
// carry If-Match / an item's `ifMatch`: the version last answered ("valid", which must not fail with
// 412), a version other than that ("stale", which must), or a guess after an uncertain write. A few
// external ids are written by every lane at once (creates racing on two instances). Every write goes
// in a ledger: acknowledged (200/201, a batch item created or updated) with the version answered,
// refused (412), or uncertain (503, no answer: the outage may or may not have let it commit).
// verify() holds the database to the ledger: see its comment.
import type pg from "pg";
import type { TenantIds } from "../../server/admin/fixture.js";
import { envelopeProblems, type Client, type Res } from "./http.js";
import { sleep } from "./scope.js";

export const SYNC_RESOURCES = ["leads", "contacts", "tickets"] as const;
type Resource = (typeof SYNC_RESOURCES)[number];
/** The field (and column) each write sets to its own value. */
const FIELD: Record<Resource, string> = { leads: "notes", contacts: "fullName", tickets: "subject" };
const TABLE: Record<Resource, string> = { leads: "Lead", contacts: "Contact", tickets: "Ticket" };
/** External ids the writers use: only theirs start so. */
const PREFIX = "sync-";
const OWNED_PER_LANE = 5;
const RACED = 3;

type Outcome = "acked" | "refused" | "uncertain";
interface Write {
  seq: number;
  value: string;
  via: "put" | "batch";
  /** The precondition sent: its kind and version. */
  pre?: { kind: "valid" | "stale" | "guess"; version: number };
  outcome?: Outcome;
  /** What an acknowledgement said: its status, and the object's version, value and id. */
  status?: string;
  version?: number;
  seen?: unknown;
  id?: string;
}
interface Ledger {
  r: Resource;
  ext: string;
  /** One lane's (writes in order, one at a time), or raced by every lane. */
  owned: boolean;
  writes: Write[];
  /** The version last learnt (from an acknowledgement or a 412), and whether no uncertain write followed. */
  known?: number;
  exact: boolean;
}

export interface SyncSample {
  res: Res;
  kind: string;
}

export class SyncWriters {
  readonly samples: SyncSample[] = [];
  readonly problems: string[] = [];
  private readonly ledgers = new Map<string, Ledger>();
  private seq = 0;
  private running = true;
  private readonly done: Promise<void>;
  private readonly counts = { puts: 0, batches: 0, items: 0, valid: 0, stale: 0 };

  constructor(
    private readonly clients: Client[],
    private readonly key: string,
    private readonly ids: TenantIds,
    lanes: number,
    private readonly pauseMs = 10,
  ) {
    for (const r of SYNC_RESOURCES) {
      for (let lane = 0; lane < lanes; lane++)
        for (let k = 0; k < OWNED_PER_LANE; k++) this.ledger(r, `${PREFIX}${lane}-${k}`, true);
      for (let k = 0; k < RACED; k++) this.ledger(r, `${PREFIX}race-${k}`, false);
    }
    this.done = Promise.all(Array.from({ length: lanes }, (_, lane) => this.lane(lane))).then(() => {});
  }

  /**
   * Whether every lane's external id has a definite answer again (no uncertain write since its last
   * acknowledgement or 412) and at least `preconditions` valid and as many stale ones were sent: an
   * outage drill runs the writers on until then (what each id holds is known again, and guessed
   * preconditions have been answered), then stops them.
   */
  settled(preconditions: number): boolean {
    const c = this.counts;
    const known = [...this.ledgers.values()].every((l) => !l.owned || l.exact);
    return known && c.valid >= preconditions && c.stale >= preconditions;
  }

  /** How many of the lanes' external ids have no definite answer since an uncertain write. */
  unsettled(): number {
    return [...this.ledgers.values()].filter((l) => l.owned && !l.exact).length;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }

  private ledger(r: Resource, ext: string, owned = true): Ledger {
    const k = `${r}/${ext}`;
    const known = this.ledgers.get(k);
    if (known) return known;
    const l: Ledger = { r, ext, owned, writes: [], exact: true };
    this.ledgers.set(k, l);
    return l;
  }

  /** A body of the resource's PUT whose one varying field is `value` (the others fixed per external id). */
  private body(l: Ledger, value: string): Record<string, unknown> {
    if (l.r === "leads") return { customerName: `Sync ${l.ext}`, customerPhone: "+34600999111", notes: value };
    if (l.r === "tickets") return { subject: value, customerId: this.ids.contacts.bea };
    // A contact's phone is unique in its tenant: one per external id.
    const n = [...this.ledgers.values()].filter((x) => x.r === "contacts").indexOf(l);
    return { fullName: value, phone: `+3464${String(n).padStart(7, "0")}` };
  }

  /**
   * The precondition a lane sends for `l` (`want`: a valid or a stale one), when one can be sent: after
   * an uncertain write the version is not known, and the one last learnt is sent as a guess.
   */
  private pre(l: Ledger, want: "valid" | "stale"): Write["pre"] {
    if (!l.owned || l.known === undefined) return undefined;
    if (!l.exact) return { kind: "guess", version: l.known };
    if (want === "stale") return { kind: "stale", version: l.known > 1 ? l.known - 1 : l.known + 1 };
    return { kind: "valid", version: l.known };
  }

  private async lane(lane: number): Promise<void> {
    const next = new Map<Resource, number>();
    const owned = (r: Resource) => {
      const k = next.get(r) ?? 0;
      next.set(r, k + 1);
      return this.ledger(r, `${PREFIX}${lane}-${k % OWNED_PER_LANE}`);
    };
    const raced = (i: number, r: Resource) => this.ledger(r, `${PREFIX}race-${i % RACED}`, false);
    for (let i = 0; this.running; i++) {
      const r = SYNC_RESOURCES[(i + lane) % SYNC_RESOURCES.length]!;
      let res: Res;
      switch (i % 5) {
        case 0:
          res = await this.put(lane, owned(r), undefined);
          break;
        case 1: {
          // Three of the lane's own (every other one with its valid ifMatch) and one raced.
          const mine = [owned(r), owned(r), owned(r)];
          const picks = mine.map((l, k) => ({ l, pre: k % 2 ? this.pre(l, "valid") : undefined }));
          res = await this.batch(lane, [...picks, { l: raced(i, r), pre: undefined }]);
          break;
        }
        case 2:
          res = await this.put(lane, raced(i + lane, r), undefined);
          break;
        case 3: {
          const l = owned(r);
          res = await this.put(lane, l, this.pre(l, "valid"));
          break;
        }
        default: {
          const [a, b] = [owned(r), owned(r)];
          res = await this.batch(lane, [
            { l: a, pre: this.pre(a, "stale") },
            { l: b, pre: this.pre(b, "valid") },
          ]);
        }
      }
      // An outage answers at once: no need to spin on it.
      await sleep(res.status === 200 || res.status === 201 ? this.pauseMs : 50);
    }
  }

  private begin(l: Ledger, via: Write["via"], pre: Write["pre"]): Write {
    const seq = this.seq++;
    const w: Write = { seq, value: `${l.ext} #${seq}`, via, pre };
    l.writes.push(w);
    if (pre?.kind === "valid") this.counts.valid += 1;
    if (pre?.kind === "stale") this.counts.stale += 1;
    return w;
  }

  /**
   * An acknowledgement of `w`, checked against what was sent. The answer is the object as it is now: a
   * ticket's is read after the write, so on a raced external id it may already show a later write's
   * value and version. On a lane's own external id nothing else writes: it shows this write's.
   */
  private acked(l: Ledger, w: Write, status: string, item: any, where: string): void {
    w.outcome = "acked";
    w.status = status;
    w.version = item?.version;
    w.seen = item?.[FIELD[l.r]];
    w.id = item?.id;
    const wrong: string[] = [];
    if (item?.externalId !== l.ext) wrong.push(`externalId ${JSON.stringify(item?.externalId)}`);
    if (typeof w.version !== "number") wrong.push(`version ${w.version}`);
    // Every write sends a value of its own: nothing is ever unchanged.
    if (status === "unchanged") wrong.push("unchanged");
    if (l.owned) {
      if (w.seen !== w.value) wrong.push(`${FIELD[l.r]} ${JSON.stringify(w.seen)}`);
      if (status === "created" && w.version !== 1) wrong.push(`created at version ${w.version}`);
      if (w.pre?.kind === "stale") wrong.push(`applied with the stale ${w.pre.version}`);
    } else if (!l.writes.some((x) => x.value === w.seen)) {
      wrong.push(`${FIELD[l.r]} ${JSON.stringify(w.seen)}: no write's`);
    }
    if (wrong.length) this.problems.push(`${where} ${l.r}/${l.ext} "${w.value}": ${wrong.join(", ")}`);
    l.known = w.version;
    l.exact = true;
  }

  /** A 412 of `w`: refused; its currentVersion is the version now. */
  private refused(l: Ledger, w: Write, currentVersion: unknown, where: string): void {
    w.outcome = "refused";
    if (!w.pre) this.problems.push(`${where} ${l.r}/${l.ext}: 412 without a precondition`);
    else if (w.pre.kind === "valid")
      this.problems.push(`${where} ${l.r}/${l.ext}: 412 for the version last answered (now ${currentVersion})`);
    else if (w.pre.kind === "stale" && currentVersion !== l.known)
      this.problems.push(`${where} ${l.r}/${l.ext}: 412 says version ${currentVersion}, the last answer ${l.known}`);
    if (typeof currentVersion === "number") {
      l.known = currentVersion;
      l.exact = true;
    } else this.problems.push(`${where} ${l.r}/${l.ext}: 412 with currentVersion ${JSON.stringify(currentVersion)}`);
  }

  private uncertain(l: Ledger, w: Write): void {
    w.outcome = "uncertain";
    l.exact = false;
  }

  /** An answer that is neither an acknowledgement nor a 412: the outage's 503 envelope, or a problem. */
  private unavailable(res: Res, where: string): void {
    if (res.status === 503) {
      for (const p of envelopeProblems(res, { error: "SERVICE_UNAVAILABLE" })) this.problems.push(`${where}: 503 ${p}`);
    } else if (res.status !== 0) {
      this.problems.push(`${where}: ${res.status} ${res.body?.error ?? ""} ${res.text.slice(0, 120)}`);
    }
  }

  private async put(lane: number, l: Ledger, pre: Write["pre"]): Promise<Res> {
    const w = this.begin(l, "put", pre);
    this.counts.puts += 1;
    const headers: Record<string, string> = pre ? { "If-Match": `"${pre.version}"` } : {};
    const client = this.clients[(lane + w.seq) % this.clients.length]!;
    const body = this.body(l, w.value);
    const path = `/public/v1/${l.r}/by-external-id/${l.ext}`;
    const res = await client.request("PUT", path, { key: this.key, body, headers, timeoutMs: 30_000 });
    this.samples.push({ res, kind: `put ${l.r}` });
    const where = `PUT${pre ? ` (If-Match ${pre.kind} ${pre.version})` : ""}`;
    if (res.status === 200 || res.status === 201) {
      const etag = res.headers.etag;
      if (etag !== `"${res.body?.version}"`) this.problems.push(`${where} ${l.r}/${l.ext}: ETag ${etag}`);
      this.acked(l, w, res.status === 201 ? "created" : "updated", res.body, where);
    } else if (res.status === 412) {
      const wrong = envelopeProblems(res, { error: "PRECONDITION_FAILED" });
      for (const p of wrong) this.problems.push(`${where} ${l.r}/${l.ext}: ${p}`);
      this.refused(l, w, res.body?.details?.currentVersion, where);
    } else {
      this.uncertain(l, w);
      this.unavailable(res, `${where} ${l.r}/${l.ext}`);
    }
    return res;
  }

  private async batch(lane: number, picks: { l: Ledger; pre: Write["pre"] }[]): Promise<Res> {
    const r = picks[0]!.l.r;
    const writes = picks.map(({ l, pre }) => ({ l, w: this.begin(l, "batch", pre) }));
    this.counts.batches += 1;
    this.counts.items += picks.length;
    const items = writes.map(({ l, w }) => ({
      externalId: l.ext,
      ...this.body(l, w.value),
      ...(w.pre && { ifMatch: w.pre.version }),
    }));
    const client = this.clients[(lane + writes[0]!.w.seq) % this.clients.length]!;
    const opts = { key: this.key, body: { items }, timeoutMs: 30_000 };
    const res = await client.request("POST", `/public/v1/${r}/batch/upsert`, opts);
    this.samples.push({ res, kind: `batch ${r}` });
    const results = res.body?.results;
    if (res.status !== 200 || !Array.isArray(results) || results.length !== items.length) {
      for (const { l, w } of writes) this.uncertain(l, w);
      const got = Array.isArray(results) ? results.length : "no";
      if (res.status === 200) this.problems.push(`batch ${r}: ${got} results for ${items.length} items`);
      else this.unavailable(res, `batch ${r}`);
      return res;
    }
    for (const [i, { l, w }] of writes.entries()) {
      const x = results[i];
      const where = `batch item${w.pre ? ` (ifMatch ${w.pre.kind} ${w.pre.version})` : ""}`;
      if (x?.index !== i) this.problems.push(`${where} ${l.r}/${l.ext}: result ${i} has index ${x?.index}`);
      if (x?.status === "created" || x?.status === "updated" || x?.status === "unchanged") {
        if (x.item === null || x.id !== x.item?.id)
          this.problems.push(`${where} ${l.r}/${l.ext}: ${x.status} with item ${JSON.stringify(x.item)?.slice(0, 80)}`);
        this.acked(l, w, x.status, x.item, where);
      } else if (x?.status === "failed" && x.error?.error === "PRECONDITION_FAILED") {
        this.refused(l, w, x.error.details?.currentVersion, where);
      } else {
        // A failed item changes nothing (it is rolled back to its savepoint); none is expected here.
        w.outcome = "refused";
        this.problems.push(`${where} ${l.r}/${l.ext}: ${x?.status} ${JSON.stringify(x?.error ?? null).slice(0, 200)}`);
      }
    }
    return res;
  }

  /**
   * The database against the ledger (every write has been answered):
   *   • no external id of the tenant is held by two objects (per resource);
   *   • every acknowledged write names the object that holds its external id, and at most one created it;
   *   • an external id of one lane (writes in order): the object's value is the last acknowledged
   *     write's, or that of an uncertain write sent after it (never a refused one's, nor an earlier
   *     one's: that would be an acknowledged write lost); the acknowledged versions grow in the order
   *     sent, and the object's version is the last acknowledged one's — plus at most one per uncertain
   *     write up to the one whose value it holds;
   *   • a raced external id: no two acknowledgements showed one version with different values; the
   *     object is at the highest version one showed, with the value shown, or past it with an
   *     uncertain write's value (a write's answer is read after its commit: the last one to commit,
   *     if acknowledged, showed the final version);
   *   • an external id with an acknowledged write is held by an object.
   */
  async verify(db: pg.Client, tenantId: string): Promise<{ problems: string[]; figure: string }> {
    const problems: string[] = [];
    const rows = new Map<string, { id: string; version: number; value: string }>();
    for (const r of SYNC_RESOURCES) {
      const dup = await db.query(
        `SELECT "externalId", count(*)::int AS n FROM "${TABLE[r]}"
          WHERE "tenantId" = $1 AND "externalId" IS NOT NULL GROUP BY 1 HAVING count(*) > 1`,
        [tenantId],
      );
      for (const d of dup.rows) problems.push(`${r}: ${JSON.stringify(d.externalId)} held by ${d.n} objects`);
      const held = await db.query(
        `SELECT "id", "externalId", "version", "${FIELD[r]}" AS value FROM "${TABLE[r]}"
          WHERE "tenantId" = $1 AND "externalId" LIKE '${PREFIX}%'`,
        [tenantId],
      );
      for (const row of held.rows) rows.set(`${r}/${row.externalId}`, row);
    }
    const outcomes = new Map<string, number>();
    for (const [k, l] of this.ledgers) {
      for (const { outcome = "unanswered" } of l.writes) outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      const wrong = ledgerProblem(l, rows.get(k));
      if (wrong) problems.push(`${k}: ${wrong}`);
    }
    const c = this.counts;
    const figure =
      `sync: ${c.puts} PUTs, ${c.batches} batches (${c.items} items), ${c.valid} valid and ${c.stale} stale ` +
      `preconditions, on ${this.ledgers.size} external ids (${rows.size} held): ` +
      [...outcomes].map(([o, n]) => `${o} ${n}`).join(", ");
    return { problems, figure };
  }
}

/** What is wrong with an external id's object (`row`; undefined: none holds it) given its writes; null: nothing. */
function ledgerProblem(l: Ledger, row: { id: string; version: number; value: string } | undefined): string | null {
  const acked = l.writes.filter((w) => w.outcome === "acked");
  if (l.writes.some((w) => !w.outcome)) return "a write without an outcome";
  if (!row) return acked.length ? `${acked.length} acknowledged writes, and no object holds it` : null;
  const named = acked.filter((w) => w.id !== row.id);
  if (named.length) return `acknowledged as ${named[0]!.id}, held by ${row.id}`;
  const created = acked.filter((w) => w.status === "created");
  if (created.length > 1) return `${created.length} writes acknowledged as creates`;
  const f = l.writes.findIndex((w) => w.value === row.value);
  if (f < 0) return `holds ${JSON.stringify(row.value)}, a value no write sent`;
  if (l.writes[f]!.outcome === "refused") return `holds the value of a refused write (${JSON.stringify(row.value)})`;
  if (l.owned) {
    let last = 0;
    for (const w of acked) {
      if (!(w.version! > last)) return `acknowledged versions out of order: ${acked.map((x) => x.version).join(", ")}`;
      last = w.version!;
    }
    const j = l.writes.findLastIndex((w) => w.outcome === "acked");
    if (f < j) return `holds write #${f}'s value: #${j} (${l.writes[j]!.value}), acknowledged after it, lost`;
    const base = j < 0 ? 0 : l.writes[j]!.version!;
    const maybe = l.writes.slice(j + 1, f + 1).filter((w) => w.outcome === "uncertain").length;
    const ok = f === j ? row.version === base : row.version > base && row.version <= base + maybe;
    if (ok) return null;
    return `at version ${row.version} with #${f}'s value; #${j}, acknowledged last, answered ${base} (${maybe} since)`;
  }
  const byVersion = new Map<number, unknown>();
  for (const w of acked) {
    const other = byVersion.get(w.version!);
    if (other !== undefined && other !== w.seen)
      return `version ${w.version} answered with ${JSON.stringify(other)} and with ${JSON.stringify(w.seen)}`;
    byVersion.set(w.version!, w.seen);
  }
  const top = Math.max(0, ...byVersion.keys());
  if (row.version < top) return `at version ${row.version}, below the acknowledged ${top}: lost`;
  if (row.version === top && byVersion.get(top) !== row.value)
    return `at the highest version answered (${top}) with ${row.value}, not ${byVersion.get(top)}`;
  if (row.version > top && l.writes[f]!.outcome !== "uncertain")
    return `past the highest version answered (${top}) with an acknowledged write's value: its answer never showed it`;
  return null;
}
