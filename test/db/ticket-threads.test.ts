// Bounded ticket threads: at most TICKET_COMMENTS_MAX comments and
// TICKET_THREAD_CHARS_MAX characters per ticket, held by the database; a comment past a bound is
// 409 TICKET_COMMENT_LIMIT_REACHED with nothing stored; an Idempotency-Key on a comment stores the
// ticket's scalars and thread length, not the thread, and its replay is byte-identical.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { TICKET_COMMENTS_MAX, TICKET_THREAD_CHARS_MAX } from "../../routers/tickets/schemas.js";
import { expectEnvelope, startApp, untimed, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", {
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001" }],
      }),
    ),
  );
});
afterAll(() => app.close());

const acme = () => ids.tenants.acme!;
const key = () => acme().apiKeys.full!.key;

async function newTicket(subject = "Thread") {
  const r = await app.request("POST", "/public/v1/tickets", {
    key: key(),
    body: { subject, customerId: acme().contacts.bea },
  });
  expect(r.status).toBe(201);
  return r.body.id as string;
}
const comment = (id: string, body: string, headers: Record<string, string> = {}) =>
  app.request("POST", `/public/v1/tickets/${id}/comments`, { key: key(), body: { body }, headers });

/** Adds n comments of `body` straight in the database (through the same trigger as the API). */
async function fill(ticketId: string, n: number, body = "x") {
  await untimed(app.db)(
    `INSERT INTO "TicketComment" ("tenantId", "ticketId", "authorUserId", "body", "createdAt")
     SELECT $1::uuid, $2::uuid, $3::uuid, $4, now() - interval '1 day' + i * interval '1 millisecond' FROM generate_series(1, $5::int) i`,
    [acme().id, ticketId, acme().users.ana, body, n],
  );
}

async function state(ticketId: string) {
  const [row] = await app.db.sql.query<{
    commentCount: number;
    commentChars: number;
    updatedAt: Date;
    n: number;
    records: number;
  }>(
    `SELECT t."commentCount", t."commentChars", t."updatedAt",
            (SELECT count(*)::int FROM "TicketComment" c WHERE c."tenantId" = t."tenantId"
              AND c."ticketId" = t."id") AS n,
            (SELECT count(*)::int FROM "IdempotencyRecord") AS records
       FROM "Ticket" t WHERE t."id" = $1`,
    [ticketId],
  );
  return { ...row!, updatedAt: new Date(row!.updatedAt).toISOString() };
}

describe("ticket thread bounds", () => {
  it("the last comment within the count fits; the next one is 409 TICKET_COMMENT_LIMIT_REACHED and changes nothing", async () => {
    const id = await newTicket();
    await fill(id, TICKET_COMMENTS_MAX - 1);
    const last = await comment(id, "the last one");
    expect(last.status).toBe(201);
    expect(last.body.comments).toHaveLength(TICKET_COMMENTS_MAX);

    const before = await state(id);
    expect(before.commentCount).toBe(TICKET_COMMENTS_MAX);
    const over = await comment(id, "one too many", { "Idempotency-Key": "over-count" });
    const env = expectEnvelope(over, 409, "TICKET_COMMENT_LIMIT_REACHED");
    expect(env.details).toEqual({ limit: "comments", max: TICKET_COMMENTS_MAX });
    // Nothing stored: no comment, counters and updatedAt unchanged, no idempotency record.
    expect(await state(id)).toEqual(before);
    // A retry with the same key is checked again (a 409 is never recorded).
    expectEnvelope(
      await comment(id, "one too many", { "Idempotency-Key": "over-count" }),
      409,
      "TICKET_COMMENT_LIMIT_REACHED",
    );
    expect(await state(id)).toEqual(before);
  });

  it("the thread's characters are bounded too (code points, as PostgreSQL counts them)", async () => {
    const id = await newTicket();
    const full = "😀".repeat(10_000); // 10,000 characters, 40,000 bytes of UTF-8
    const n = Math.floor(TICKET_THREAD_CHARS_MAX / 10_000);
    await fill(id, n - 1, full);
    expect((await comment(id, full)).status).toBe(201); // exactly at the bound
    const before = await state(id);
    expect(before.commentChars).toBe(TICKET_THREAD_CHARS_MAX);
    const over = await comment(id, "a");
    const env = expectEnvelope(over, 409, "TICKET_COMMENT_LIMIT_REACHED");
    expect(env.details).toEqual({ limit: "characters", max: TICKET_THREAD_CHARS_MAX });
    expect(await state(id)).toEqual(before);
  });

  it("concurrent commenters at one below the bound: exactly one succeeds", async () => {
    const id = await newTicket();
    await fill(id, TICKET_COMMENTS_MAX - 1);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => comment(id, `racer ${i}`)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 201)) expectEnvelope(r, 409, "TICKET_COMMENT_LIMIT_REACHED");
    const s = await state(id);
    expect(s.n).toBe(TICKET_COMMENTS_MAX);
    expect(s.commentCount).toBe(TICKET_COMMENTS_MAX);
  });

  it("a full thread still answers reads and PATCH; the worst-case ticket stays under 1 MB", async () => {
    const id = await newTicket("\u0001".repeat(500));
    // Worst case: every bound reached (500 comments of at least one character, 150,000 characters),
    // every character a control character, which JSON escapes as \u00XX (6 bytes).
    const c = "\u0001";
    const heavy = Math.floor((TICKET_THREAD_CHARS_MAX - TICKET_COMMENTS_MAX) / 10_000); // 14 comments of 10,000
    const light = TICKET_COMMENTS_MAX - heavy - 1;
    await fill(id, light, c);
    await fill(id, heavy, c.repeat(10_000));
    await fill(id, 1, c.repeat(TICKET_THREAD_CHARS_MAX - light - heavy * 10_000));
    const s = await state(id);
    expect([s.commentCount, s.commentChars]).toEqual([TICKET_COMMENTS_MAX, TICKET_THREAD_CHARS_MAX]);
    const r = await app.request("PATCH", `/public/v1/tickets/${id}`, {
      key: key(),
      body: { status: "pending", assignedTo: acme().users.ana },
    });
    expect(r.status).toBe(200);
    expect(r.body.comments).toHaveLength(TICKET_COMMENTS_MAX);
    const bytes = Buffer.byteLength(r.text);
    expect(bytes).toBeGreaterThan(950_000);
    expect(bytes).toBeLessThan(1_000_000);
  });

  it("a comment on an unknown ticket is still 404 (the trigger leaves it to the foreign key)", async () => {
    const r = await comment(crypto.randomUUID(), "hello");
    expectEnvelope(r, 404, "NOT_FOUND");
  });
});

describe("Idempotency-Key on a comment", () => {
  it("stores the ticket's scalars and thread length, not the thread; the replay is byte-identical", async () => {
    const id = await newTicket();
    // "q" is no hex digit: a run of it cannot come from an id or a key in the stored record (a run
    // of "b" could: a uuid held "bbbb" once in a CI run, about one in a thousand).
    const big = "q".repeat(10_000);
    for (let i = 0; i < 5; i++) expect((await comment(id, big)).status).toBe(201);
    const first = await comment(id, big, { "Idempotency-Key": "thread-1" });
    expect(first.status).toBe(201);
    expect(first.body.comments).toHaveLength(6);

    const [rec] = await app.db.sql.query<{ size: number; body: any }>(
      `SELECT octet_length("responseBody"::text) AS size, "responseBody" AS body FROM "IdempotencyRecord"
       WHERE "tenantId" = $1 AND "key" = 'thread-1'`,
      [acme().id],
    );
    expect(rec!.size).toBeLessThan(2_000); // the response is over 60 KB
    expect(JSON.stringify(rec!.body)).not.toContain("qqqq");

    // The ticket moves on: more comments, a new status and subject.
    expect((await comment(id, "later")).status).toBe(201);
    expect(
      (
        await app.request("PATCH", `/public/v1/tickets/${id}`, {
          key: key(),
          body: { status: "closed", subject: "Renamed" },
        })
      ).status,
    ).toBe(200);

    const replay = await comment(id, big, { "Idempotency-Key": "thread-1" });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(first.text);
    expect((await state(id)).n).toBe(7);
  });

  it("a record stored whole (before this change) still replays as is", async () => {
    const id = await newTicket();
    const first = await comment(id, "legacy", { "Idempotency-Key": "legacy-1" });
    expect(first.status).toBe(201);
    await app.db.sql.query(`UPDATE "IdempotencyRecord" SET "responseBody" = $1::jsonb WHERE "key" = 'legacy-1'`, [
      first.text,
    ]);
    const replay = await comment(id, "legacy", { "Idempotency-Key": "legacy-1" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(first.text);
  });

  it("comments are immutable in the database", async () => {
    const id = await newTicket();
    expect((await comment(id, "fixed")).status).toBe(201);
    await expect(
      app.db.sql.query(`UPDATE "TicketComment" SET "body" = 'changed' WHERE "ticketId" = $1`, [id]),
    ).rejects.toThrow(/immutable/);
  });
});
