// The idempotency mechanism itself (server/idempotency.ts), on a real table; the HTTP behaviour of
// each create endpoint is tested in the resource files.
// @topology pooler
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../../server/errors.js";
import {
  AfterCommit,
  fingerprint,
  purgeExpiredIdempotencyRecords,
  readIdempotencyKey,
  withIdempotency,
} from "../../server/idempotency.js";
import { freshDatabase, type TestDb } from "../helpers/app.js";
import { loadFixture } from "../../server/admin/fixture.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { until } from "../helpers/processes.js";

let t: TestDb;
let tenantId: string;
let apiKeyId: string;
beforeAll(async () => {
  t = await freshDatabase();
  const ids = await loadFixture(t.db, fixture(tenant("acme")));
  tenantId = ids.tenants.acme!.id;
  apiKeyId = ids.tenants.acme!.apiKeys.full!.id;
});
afterAll(() => t.drop());

const claim = (key: string, body: unknown, ttlSeconds = 3600) => ({
  tenantId,
  apiKeyId,
  endpoint: "test.create",
  key,
  fingerprint: fingerprint(body),
  ttlSeconds,
});
const countLists = async (name: string) => t.db.prisma.contactList.count({ where: { tenantId, name } });

function createList(name: string) {
  return withIdempotency(t.db, claim(`k-${name}`, { name }), async (tx) => {
    const row = await tx.contactList.create({ data: { tenantId, name } });
    return { id: row.id, name };
  });
}

describe("Idempotency-Key", () => {
  it("header: 1–255 visible ASCII characters", () => {
    expect(readIdempotencyKey(undefined)).toBeUndefined();
    expect(readIdempotencyKey("abc-123")).toBe("abc-123");
    expect(readIdempotencyKey("x".repeat(255))).toBe("x".repeat(255));
    for (const bad of ["", "x".repeat(256), "has space", "tab\t", "ñ"])
      expect(() => readIdempotencyKey(bad)).toThrow(AppError);
  });
  it("fingerprint ignores key order and undefined values", () => {
    expect(fingerprint({ a: 1, b: { c: 2, d: [1, 2] } })).toBe(
      fingerprint({ b: { d: [1, 2], c: 2 }, a: 1, e: undefined }),
    );
    expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: 2 }));
  });
  it("a repeat replays the stored body without a second write", async () => {
    const first = await createList("replay");
    const second = await createList("replay");
    expect(first.replayed).toBe(false);
    expect(second.replayed).toBe(true);
    expect(second.body).toEqual(first.body);
    expect(await countLists("replay")).toBe(1);
  });
  it("the same key with a different body → IDEMPOTENCY_KEY_REUSE_MISMATCH, nothing written", async () => {
    await createList("mismatch");
    const err = await withIdempotency(t.db, claim("k-mismatch", { name: "other" }), async (tx) => {
      await tx.contactList.create({ data: { tenantId, name: "should-not-exist" } });
      return {};
    }).catch((e) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err.code).toBe("IDEMPOTENCY_KEY_REUSE_MISMATCH");
    expect(await countLists("should-not-exist")).toBe(0);
  });
  it("a failed write stores nothing: the retry runs again", async () => {
    let calls = 0;
    const attempt = () =>
      withIdempotency(t.db, claim("k-fail", { n: 1 }), async (tx) => {
        calls++;
        await tx.contactList.create({ data: { tenantId, name: "fail-once" } });
        if (calls === 1) throw new AppError("NOT_FOUND", "nope");
        return { ok: calls };
      });
    await expect(attempt()).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(await countLists("fail-once")).toBe(0);
    expect((await attempt()).body).toEqual({ ok: 2 });
    expect(await countLists("fail-once")).toBe(1);
  });
  it("10 concurrent duplicates execute once and all answer the same body", async () => {
    const results = await Promise.all(Array.from({ length: 10 }, () => createList("concurrent")));
    expect(new Set(results.map((r) => JSON.stringify(r.body))).size).toBe(1);
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    expect(await countLists("concurrent")).toBe(1);
  });
  it("keys are scoped by endpoint: the same key on another endpoint is independent", async () => {
    await createList("scoped");
    const other = await withIdempotency(
      t.db,
      { ...claim("k-scoped", { name: "scoped" }), endpoint: "test.other" },
      async () => ({ other: true }),
    );
    expect(other).toEqual({ body: { other: true }, replayed: false });
  });
  it("expired records are taken over and purged", async () => {
    const first = await withIdempotency(t.db, claim("k-exp", { a: 1 }, 0), async () => ({ n: 1 }));
    const again = await withIdempotency(t.db, claim("k-exp", { a: 2 }, 0), async () => ({ n: 2 }));
    expect(first.body).toEqual({ n: 1 });
    expect(again).toEqual({ body: { n: 2 }, replayed: false });
    expect(await purgeExpiredIdempotencyRecords(t.db)).toBeGreaterThanOrEqual(1);
    expect(await t.db.prisma.idempotencyRecord.count({ where: { key: "k-exp" } })).toBe(0);
  });

  // A create ending with a provider call (AfterCommit): the claim commits unfinished, `finish` runs
  // outside the transaction, duplicates wait for it; an abandoned claim is finished by recover().
  it("AfterCommit: finish runs once after the commit; a concurrent duplicate waits and replays its body", async () => {
    let finishes = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const attempt = () =>
      withIdempotency(
        t.db,
        claim("k-after", { a: 1 }),
        async (tx) => {
          const row = await tx.contactList.create({ data: { tenantId, name: "after-commit" } });
          return new AfterCommit({ id: row.id }, async (db) => {
            finishes++;
            // Committed before the finish: visible outside the transaction.
            expect(await db.contactList.count({ where: { id: row.id } })).toBe(1);
            await gate;
            return { id: row.id, finished: true };
          });
        },
        { staleAfterMs: 60_000, recover: async () => ({ recovered: true }) as any },
      );
    const first = attempt();
    // The first attempt has committed its claim and waits in its finish: poll for it (bounded).
    expect(await until(() => finishes === 1, 30_000, 10)).toBe(true);
    const second = attempt();
    // The second one meets the claim in progress (or, later, its result: replayed either way)
    await new Promise((r) => setTimeout(r, 300));
    release();
    const [a, b] = await Promise.all([first, second]);
    expect(a.replayed).toBe(false);
    expect(b).toEqual({ body: a.body, replayed: true });
    expect(a.body).toMatchObject({ finished: true });
    expect(finishes).toBe(1);
    expect(await countLists("after-commit")).toBe(1);
  });
  it("AfterCommit without a key: finish runs after the commit", async () => {
    const r = await withIdempotency(t.db, undefined, async (tx) => {
      const row = await tx.contactList.create({ data: { tenantId, name: "after-nokey" } });
      return new AfterCommit({}, async (db) => ({ seen: await db.contactList.count({ where: { id: row.id } }) }));
    });
    expect(r).toEqual({ body: { seen: 1 }, replayed: false });
  });
  it("an abandoned unfinished claim is finished by the next duplicate with recover(), once", async () => {
    await t.db.prisma
      .$executeRaw`INSERT INTO "IdempotencyRecord" ("tenantId", "apiKeyId", "endpoint", "key", "fingerprint",
                   "statusCode", "responseBody", "createdAt", "expiresAt")
      VALUES (${tenantId}::uuid, ${apiKeyId}::uuid, 'test.create', 'k-abandoned', ${fingerprint({ b: 1 })}, 0,
        '{"pending":{"n":7}}'::jsonb, now() - interval '1 minute', now() + interval '1 hour')`;
    const notes: unknown[] = [];
    const attempt = () =>
      withIdempotency<unknown>(t.db, claim("k-abandoned", { b: 1 }), async () => ({ ran: true }), {
        staleAfterMs: 10_000,
        recover: async (_db, note) => {
          notes.push(note);
          return { recovered: note };
        },
      });
    const [x, y] = await Promise.all([attempt(), attempt()]);
    expect(x).toEqual({ body: { recovered: { n: 7 } }, replayed: true });
    expect(y).toEqual(x);
    expect(notes).toEqual([{ n: 7 }]);
  });
  it("one statement: a row the database refuses (a foreign key) falls back to the transactional path; nothing persists", async () => {
    const k = "k-one-statement-refused";
    const stageId = crypto.randomUUID();
    const row = { id: crypto.randomUUID(), tenantId, customerName: "Refused", stageId };
    let transactional = 0;
    const err = await withIdempotency(
      t.db,
      claim(k, { stageId }),
      async () => {
        transactional++;
        throw new AppError("NOT_FOUND", "Stage not found");
      },
      undefined,
      undefined,
      async () => ({ table: "Lead", row, body: { id: row.id } }),
    ).catch((e) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err.code).toBe("NOT_FOUND");
    expect(transactional).toBe(1);
    expect(await t.db.prisma.idempotencyRecord.count({ where: { tenantId, key: k } })).toBe(0);
    expect(await t.db.prisma.lead.count({ where: { tenantId, id: row.id } })).toBe(0);
  });
  it("one statement: a key that is taken is answered by the transactional path (replay), the plan's row is not written", async () => {
    const first = await createList("one-statement-taken");
    const stage = await t.db.prisma.pipelineStage.findFirstOrThrow({ where: { tenantId }, select: { id: true } });
    const row = { id: crypto.randomUUID(), tenantId, customerName: "Never", stageId: stage.id };
    const again = await withIdempotency(
      t.db,
      claim("k-one-statement-taken", { name: "one-statement-taken" }),
      async () => ({ id: "other", name: "x" }),
      undefined,
      undefined,
      async () => ({ table: "Lead", row, body: { id: row.id, name: "x" } }),
    );
    expect(again.replayed).toBe(true);
    expect(again.body).toEqual(first.body);
    expect(await t.db.prisma.lead.count({ where: { tenantId, id: row.id } })).toBe(0);
  });
});
