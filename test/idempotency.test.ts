// The idempotency mechanism itself (server/idempotency.ts), on a real table; the HTTP behaviour of
// each create endpoint is tested in the resource files.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../server/errors.js";
import { fingerprint, purgeExpiredIdempotencyRecords, readIdempotencyKey, withIdempotency } from "../server/idempotency.js";
import { freshDatabase, type TestDb } from "./helpers/app.js";
import { loadFixture } from "../server/admin/fixture.js";
import { fixture, tenant } from "./helpers/fixtures.js";

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

const claim = (key: string, body: unknown, ttlSeconds = 3600) => ({ apiKeyId, endpoint: "test.create", key, fingerprint: fingerprint(body), ttlSeconds });
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
    for (const bad of ["", "x".repeat(256), "has space", "tab\t", "ñ"]) expect(() => readIdempotencyKey(bad)).toThrow(AppError);
  });
  it("fingerprint ignores key order and undefined values", () => {
    expect(fingerprint({ a: 1, b: { c: 2, d: [1, 2] } })).toBe(fingerprint({ b: { d: [1, 2], c: 2 }, a: 1, e: undefined }));
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
    const other = await withIdempotency(t.db, { ...claim("k-scoped", { name: "scoped" }), endpoint: "test.other" }, async () => ({ other: true }));
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
});
