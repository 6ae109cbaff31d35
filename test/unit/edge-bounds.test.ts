// The bounds and edge rules as pure functions: the request target in origin form, echoed names cut
// (server/errors.ts echoed, zodDetails; server/body.ts), the member caps (jsonShapeProblem), the
// negative cache of unknown key prefixes (server/auth/unknown-prefixes.ts, with an injected clock),
// the external id's "." and ".." (model/sync.ts) and a long load's progress on a terminal
// (server/admin/progress.ts). Over HTTP: test/db/edge-bounds.test.ts.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ExternalId } from "../../model/sync.js";
import { loadProgress, PROGRESS_AFTER_MS } from "../../server/admin/progress.js";
import { UnknownPrefixes } from "../../server/auth/unknown-prefixes.js";
import {
  jsonShapeProblem,
  MAX_BATCH_JSON_MEMBERS,
  MAX_JSON_MEMBERS,
  parseJsonBody,
  queryTextProblems,
  textProblems,
} from "../../server/body.js";
import { echoed, MAX_ECHOED_NAME, zodDetails } from "../../server/errors.js";
import { originForm } from "../../server/http.js";

describe("originForm", () => {
  it("drops an absolute-form target's scheme and authority, the path and query kept byte for byte", () => {
    expect(originForm("http://other.example/public/v1/leads/x")).toBe("/public/v1/leads/x");
    expect(originForm("HTTPS://u@h.example:8443/public/v1/leads?x=%2e%2e&y=1")).toBe("/public/v1/leads?x=%2e%2e&y=1");
    expect(originForm("http://h.example/a/%2e%2e/b")).toBe("/a/%2e%2e/b");
    expect(originForm("http://h.example")).toBe("/");
    expect(originForm("http://h.example?q=1")).toBe("/?q=1");
  });
  it("leaves origin-form and other targets as they are", () => {
    for (const t of ["/public/v1/me", "//public/v1/me", "*", "/a?u=http://x.example/"]) expect(originForm(t)).toBe(t);
  });
});

describe("echoed names", () => {
  it("are cut to MAX_ECHOED_NAME code units with an ellipsis, never splitting a surrogate pair", () => {
    expect(echoed("short")).toBe("short");
    const long = "k".repeat(900_000);
    expect(echoed(long)).toBe(`${"k".repeat(MAX_ECHOED_NAME - 1)}…`);
    const emoji = `${"k".repeat(MAX_ECHOED_NAME - 3)}😀😀😀`; // a pair across the cut
    const cut = echoed(emoji);
    expect(cut.length).toBeLessThanOrEqual(MAX_ECHOED_NAME);
    expect((cut as string & { isWellFormed(): boolean }).isWellFormed()).toBe(true);
  });

  it("zodDetails: an unknown key, a nested path and a long message are cut", () => {
    const key = "u".repeat(900_000);
    const schema = z.object({ a: z.object({ b: z.string() }).strict() }).strict();
    const r = schema.safeParse({ a: { b: 1, [key]: 1 }, [key]: 2 });
    const d = zodDetails(r.error!) as { fields: { field: string; message: string }[] };
    expect(JSON.stringify(d).length).toBeLessThan(2_000);
    for (const f of d.fields) expect(f.field.length).toBeLessThanOrEqual(MAX_ECHOED_NAME);
    const cut = `${"u".repeat(MAX_ECHOED_NAME - 1)}…`;
    expect(d.fields.map((f) => f.field)).toEqual(expect.arrayContaining(["a.b", cut]));
  });

  it("text problems name their key and query parameter cut too", () => {
    const key = `${"t".repeat(10_000)}\u0000`;
    const [body] = textProblems({ [key]: 1 });
    expect(body!.field).toBe(`${"t".repeat(MAX_ECHOED_NAME - 1)}…`);
    const [query] = queryTextProblems(`${"q".repeat(10_000)}%FF=1`);
    expect(query!.field.length).toBe(MAX_ECHOED_NAME);
  });
});

describe("member caps", () => {
  const members = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":1`).join(",")}}`;
  it("MAX_JSON_MEMBERS by default, MAX_BATCH_JSON_MEMBERS where the transport says so", () => {
    expect(jsonShapeProblem(members(MAX_JSON_MEMBERS))).toBeNull();
    expect(jsonShapeProblem(members(MAX_JSON_MEMBERS + 1))).toBe("too_many_members");
    expect(jsonShapeProblem(members(MAX_JSON_MEMBERS + 1), MAX_BATCH_JSON_MEMBERS)).toBeNull();
    expect(jsonShapeProblem(members(MAX_BATCH_JSON_MEMBERS + 1), MAX_BATCH_JSON_MEMBERS)).toBe("too_many_members");
    const refused = parseJsonBody("application/json", members(MAX_BATCH_JSON_MEMBERS + 1), MAX_BATCH_JSON_MEMBERS);
    const message = `Request body has more than ${MAX_BATCH_JSON_MEMBERS} fields`;
    expect("problem" in refused && refused.problem.message).toBe(message);
  });
});

describe("UnknownPrefixes", () => {
  it("remembers a prefix for ttlMs exactly (injected clock), then forgets it", () => {
    let now = 1_000;
    const c = new UnknownPrefixes(() => now, 5_000, 10);
    expect(c.has("crm_A")).toBe(false);
    c.add("crm_A");
    now += 4_999;
    expect(c.has("crm_A")).toBe(true);
    now += 1;
    expect(c.has("crm_A")).toBe(false);
    expect(c.size).toBe(0);
  });

  it("holds at most `capacity` prefixes: expired ones go first, then the oldest", () => {
    let now = 0;
    const c = new UnknownPrefixes(() => now, 1_000, 3);
    c.add("a");
    now = 500;
    c.add("b");
    c.add("c");
    c.add("d"); // full: "a", the oldest, goes
    expect(["a", "b", "c", "d"].map((p) => c.has(p))).toEqual([false, true, true, true]);
    now = 1_200; // "b", "c" and "d" expire at 1,500
    c.add("b"); // re-added: now the newest
    c.add("e"); // full: "c" (oldest) goes
    expect(c.size).toBe(3);
    expect(["b", "c", "d", "e"].map((p) => c.has(p))).toEqual([true, false, true, true]);
    now = 1_600; // "d" expired
    c.add("f"); // the expired "d" goes first
    expect(["b", "d", "e", "f"].map((p) => c.has(p))).toEqual([true, false, true, true]);
  });
});

describe("external ids", () => {
  it('"." and ".." are refused; other dotted ids are not', () => {
    for (const id of [".", ".."]) expect(ExternalId.safeParse(id).success).toBe(false);
    for (const id of ["...", ".a", "a.", "crm.42", "./x"]) expect(ExternalId.safeParse(id).success).toBe(true);
  });
});

describe("a load's progress", () => {
  const tty = () => {
    const out: string[] = [];
    return { out, stream: { isTTY: true, write: (t: string) => out.push(t) } };
  };

  it("nothing at all when standard error is not a terminal", () => {
    expect(loadProgress({ isTTY: false, write: () => expect.fail("written") })).toBeUndefined();
    expect(loadProgress({ write: () => expect.fail("written") })).toBeUndefined();
  });

  it("on a terminal: silent for PROGRESS_AFTER_MS, then rows and rate at most once a second, and a last line", () => {
    let now = 0;
    const { out, stream } = tty();
    const p = loadProgress(stream, () => now)!;
    p.rows("Contact", 5_000);
    now = PROGRESS_AFTER_MS - 1;
    p.rows("Lead", 5_000);
    expect(out).toEqual([]);
    now = 4_000;
    p.rows("Lead", 10_000);
    expect(out).toEqual(["\r\x1b[2Kload: 20,000 rows in 4 s (5,000 rows/s)"]);
    now = 4_500;
    p.rows("Lead", 5_000); // within a second of the last line: not shown
    expect(out).toHaveLength(1);
    now = 5_000;
    p.rows("Lead", 5_000);
    expect(out.at(-1)).toBe("\r\x1b[2Kload: 30,000 rows in 5 s (6,000 rows/s)");
    now = 6_000;
    p.end();
    expect(out.at(-1)).toBe("\r\x1b[2Kload: 30,000 rows in 6 s (5,000 rows/s)\n");
  });

  it("a short load on a terminal shows nothing, not even at its end", () => {
    let now = 0;
    const { out, stream } = tty();
    const p = loadProgress(stream, () => now)!;
    p.rows("Lead", 100);
    now = 2_000;
    p.end();
    expect(out).toEqual([]);
  });
});
