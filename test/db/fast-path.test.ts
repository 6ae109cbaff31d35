// The one fast path of a write that stays (PUT /contacts/by-external-id's update in one statement,
// routers/contacts/upsert.ts fastUpdate: measured in bench/results, PUT against its baseline) answers
// exactly what the general path answers, on generated inputs: a contact in many states (names, emails,
// a country or none, an international or a national phone, deleted or live, at some version) and a
// PUT body (the phone spelled another way, another country, fullName/email changed or not, an email
// another contact holds) with or without If-Match. Each case runs both paths in transactions that are
// rolled back, from the same row: whenever the fast path writes, its answer — the object or the
// failure — is the general path's.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { admitKey, keyAdmission } from "../../server/auth/guard.js";
import type { Caller } from "../../server/auth/authenticate.js";
import { toAppError } from "../../server/errors.js";
import { contactUpserts } from "../../routers/contacts/upsert.js";
import { createContext, type AuthedContext } from "../../routers/trpc.js";
import type { EntityTags } from "../../routers/_lib/sync.js";
import { startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;
let caller: Caller;
const NOW = new Date("2026-12-07T10:00:00.000Z");

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", {
        defaultCountry: "ES",
        contacts: [{ ref: "holder", fullName: "Holder", phone: "+34699999999", email: "taken@acme.test" }],
      }),
    ),
  );
  app.setNow(NOW);
  const decision = await admitKey(app.services, keyAdmission(app.services), ids.tenants.acme!.apiKeys.full!.key);
  caller = decision.caller!;
}, 60_000);
afterAll(() => app?.close());

/** A context whose queries run on `tx` (a transaction of the test's). */
async function contextOn(tx: AuthedContext["db"]): Promise<AuthedContext> {
  const base = await createContext(app.services, {
    requestId: "fast-path",
    request: { transport: "in-process" },
    caller,
  });
  return { ...base, db: tx, caller, tenantId: caller.tenantId, outcome: {} };
}

class Rollback extends Error {}
/** Runs `fn` in a transaction that is rolled back afterwards; what it answered (an object, a failure's code, or nothing). */
async function rolledBack<T>(fn: (ctx: AuthedContext) => Promise<T>): Promise<{ value?: T; error?: string }> {
  let out: { value?: T; error?: string } = {};
  await app.db.prisma
    .$transaction(async (tx) => {
      try {
        out = { value: await fn(await contextOn(tx as AuthedContext["db"])) };
      } catch (err) {
        const app_ = toAppError(err);
        out = { error: `${app_.status} ${app_.code} ${JSON.stringify(app_.details)}` };
      }
      throw new Rollback();
    })
    .catch((err) => {
      if (!(err instanceof Rollback)) throw err;
    });
  return out;
}

/**
 * An answer with its updatedAt set aside: the database stamps each transaction's own time (the
 * "row_touch" trigger), and the two paths run in two transactions.
 */
const unstamped = <T>(r: { value?: T; error?: string }) =>
  r.value !== null && typeof r.value === "object" ? { ...r, value: { ...r.value, updatedAt: "(stamped)" } } : r;

const name = fc.constantFrom("Ana", "Bea Soto", "ana", "", "Zoë", "New name");
const email = fc.constantFrom(undefined, null, "a@acme.test", "A@acme.test", "taken@acme.test", "b@acme.test");
const stored = fc.record({
  fullName: fc.constantFrom(null, "Ana", "Bea Soto"),
  email: fc.constantFrom(null, "a@acme.test", "b@acme.test"),
  country: fc.constantFrom(null, "ES", "FR", "GB"),
  deleted: fc.constantFrom(false, false, false, true),
  versions: fc.integer({ min: 1, max: 3 }),
});
const put = fc.record({
  fullName: fc.option(name, { nil: undefined }),
  email,
  phoneForm: fc.constantFrom("e164", "e164", "national", "spaced", "other"),
  // "stored": the contact's own country (when it has one) — the cases the fast path can take.
  country: fc.constantFrom(undefined, undefined, "stored", "ES", "FR"),
  ifMatch: fc.constantFrom(undefined, undefined, "current", "stale", "*", "weak"),
});

let n = 0;

describe("PUT /contacts/by-external-id: the one-statement update answers what the general path answers", () => {
  it("on generated contacts and bodies, with and without If-Match", async () => {
    let fastWrites = 0;
    await fc.assert(
      fc.asyncProperty(stored, put, async (s, p) => {
        const externalId = `fp-${++n}`;
        // A phone of its own (every case's contact stays: the unique index would refuse a repeat).
        const national = 610_000_000 + n;
        const e164 = `+34${national}`;
        // The contact as stored, at its version (each version a real write through the trigger).
        const [row] = await app.db.sql.query<{ id: string }>(
          `INSERT INTO "Contact" ("tenantId", "fullName", "phone", "email", "country", "origin", "externalId", "deletedAt", "createdAt", "updatedAt")
           VALUES ($1, $2, $3, $4, $5, 'api', $6, $7, now(), now()) RETURNING "id"`,
          [
            caller.tenantId,
            s.fullName,
            e164,
            s.email === null ? null : `${n}.${s.email}`,
            s.country,
            externalId,
            s.deleted ? new Date() : null,
          ],
        );
        for (let v = 1; v < s.versions; v++)
          await app.db.sql.query(`UPDATE "Contact" SET "fullName" = coalesce("fullName", '') || '.' WHERE "id" = $1`, [
            row!.id,
          ]);
        const [{ version }] = (await app.db.sql.query<{ version: number }>(
          `SELECT "version" FROM "Contact" WHERE "id" = $1`,
          [row!.id],
        )) as [{ version: number }];
        const phone = {
          e164,
          national: String(national),
          spaced: `${String(national).slice(0, 3)} ${String(national).slice(3)}`,
          other: "+34699999998",
        }[p.phoneForm];
        const body = {
          phone,
          ...(p.fullName !== undefined ? { fullName: p.fullName } : {}),
          ...(p.email !== undefined
            ? { email: p.email === null || p.email === "taken@acme.test" ? p.email : `${n}.${p.email}` }
            : {}),
          ...(p.country === "stored"
            ? s.country
              ? { country: s.country }
              : {}
            : p.country !== undefined
              ? { country: p.country }
              : {}),
        } as Parameters<typeof contactUpserts.update>[2];
        const pre: EntityTags | undefined =
          p.ifMatch === undefined
            ? undefined
            : p.ifMatch === "*"
              ? { any: true, strong: [], weak: [] }
              : p.ifMatch === "weak"
                ? { any: false, strong: [], weak: [version] }
                : { any: false, strong: [p.ifMatch === "current" ? version : version + 5], weak: [] };
        const general = await rolledBack(async (ctx) => {
          const [found] = await contactUpserts.find(ctx, [externalId]);
          const item = await contactUpserts.update(ctx, found!, body, pre);
          return item ?? "unchanged";
        });
        const fast = await rolledBack((ctx) => contactUpserts.fastUpdate!(ctx, externalId, body, pre));
        if (fast.value === undefined && fast.error === undefined) return; // not taken: the general path answers
        fastWrites += 1;
        expect(unstamped(fast), JSON.stringify({ s, p })).toEqual(unstamped(general));
      }),
      { numRuns: 200, seed: 20261207 },
    );
    // The generator reaches the fast path often enough to mean something.
    expect(fastWrites).toBeGreaterThan(25);
  }, 120_000);
});
