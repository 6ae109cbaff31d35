// The counter registry (routers/_lib/counters.ts) and the database agree: the pairs (list,
// filter) the registry says are counted are exactly those the migrated "ListCounter_keys" produces,
// from the same columns; the order column's buckets are the registry's; every counted column is in
// its table's UPDATE trigger (else an update moving a row to another filter value would not move its
// counters); only registered lists have counter triggers. An unregistered filter is counted row by row
// and reported once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "../../generated/prisma/client.js";
import { LIST_COUNTERS, setOnUncounted, type CountedList } from "../../routers/_lib/counters.js";
import { eq, exactTotal } from "../../routers/_lib/totals.js";
import { freshDatabase, type TestDb } from "../helpers/app.js";

let t: TestDb;
beforeAll(async () => {
  t = await freshDatabase();
});
afterAll(() => t.drop());

const BASE = new Set(["all", "y", "m", "d"]);
const lists = Object.entries(LIST_COUNTERS as Record<string, CountedList>);

/** A row of `table` with every column set, each to a value of its own (timestamps: a year each). */
async function fullRow(table: string): Promise<Record<string, unknown>> {
  const cols = await t.db.sql.query<{ name: string; type: string }>(
    `SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = 'public'
     AND table_name = $1 ORDER BY ordinal_position`,
    [table],
  );
  expect(cols.length, table).toBeGreaterThan(3);
  const row: Record<string, unknown> = {};
  cols.forEach((c, i) => {
    row[c.name] =
      c.type === "uuid"
        ? `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`
        : c.type.startsWith("timestamp")
          ? `${2001 + i}-02-03T04:05:06.000Z`
          : c.type === "integer" || c.type === "bigint"
            ? i
            : c.type === "boolean"
              ? true
              : c.type === "ARRAY"
                ? []
                : c.type === "jsonb"
                  ? {}
                  : `v${i}`;
  });
  return row;
}

async function keys(table: string, row: Record<string, unknown>) {
  return t.db.sql.query<{ dim: string; value: string }>(
    `SELECT "dim", "value" FROM "ListCounter_keys"($1, $2::jsonb)`,
    [table, JSON.stringify(row)],
  );
}

describe("the counter registry and the database agree", () => {
  it.each(lists)(
    "%s: the keys function counts exactly the registered filters, from their columns, and buckets the registered order column",
    async (table, list) => {
      const row = await fullRow(table);
      if (table === "Contact") row.deletedAt = null; // counted while live
      const got = await keys(table, row);
      const filters = Object.entries(list.filters).filter(([, f]) => !f.via);
      expect(Object.fromEntries(got.filter((k) => !BASE.has(k.dim)).map((k) => [k.dim, k.value]))).toEqual(
        Object.fromEntries(filters.map(([dim, f]) => [dim, String(row[f.column])])),
      );
      expect(got.filter((k) => k.dim === "all")).toEqual([{ dim: "all", value: "" }]);
      expect(got.find((k) => k.dim === "y")?.value).toBe(String(row[list.order]).slice(0, 4));
      expect(got.find((k) => k.dim === "d")?.value).toBe(String(row[list.order]).slice(0, 10));
    },
  );

  it("a row with a filter column NULL has no key for it; a soft-deleted contact has none at all", async () => {
    const ticket = await fullRow("Ticket");
    ticket.assignedToId = null;
    expect((await keys("Ticket", ticket)).map((k) => k.dim).sort()).toEqual([
      "all",
      "customerId",
      "d",
      "m",
      "status",
      "y",
    ]);
    const contact = await fullRow("Contact");
    expect(await keys("Contact", contact)).toEqual([]); // deletedAt set
  });

  it("the filters kept from another table are the memberships' list ids, kept by the trigger of ContactListMember", async () => {
    const via = lists.flatMap(([table, l]) =>
      Object.entries(l.filters)
        .filter(([, f]) => f.via)
        .map(([dim, f]) => `${table}.${dim} via ${f.via}`),
    );
    expect(via).toEqual(["Contact.listId via ContactListMember"]);
  });

  it("every counted column is in its table's UPDATE trigger, and only the registered lists (and memberships) have counter triggers", async () => {
    const triggers = await t.db.sql.query<{ table: string; name: string; def: string }>(
      `SELECT c.relname AS "table", g.tgname AS name, pg_get_triggerdef(g.oid) AS def FROM pg_trigger g JOIN pg_class c
       ON c.oid = g.tgrelid
        WHERE NOT g.tgisinternal AND c.relnamespace = 'public'::regnamespace AND g.tgname LIKE 'ListCounter%'`,
    );
    const tables = [...new Set(triggers.map((x) => x.table))].sort();
    expect(tables).toEqual([...lists.map(([table]) => table), "ContactListMember"].sort());
    for (const [table, list] of lists) {
      const update = triggers.find((x) => x.table === table && x.name === "ListCounter_update");
      expect(update, table).toBeDefined();
      for (const [dim, f] of Object.entries(list.filters)) {
        if (f.via) continue;
        expect(update!.def, `${table}.${dim}`).toMatch(
          new RegExp(`old\\.(?:"${f.column}"|${f.column.toLowerCase()}(?![A-Za-z0-9_"]))`),
        );
      }
      expect(update!.def, `${table} order`).toMatch(
        new RegExp(`old\\.(?:"${list.order}"|${list.order.toLowerCase()}(?![A-Za-z0-9_"]))`),
      );
      for (const name of ["ListCounter_insert", "ListCounter_update", "ListCounter_delete"])
        expect(triggers.find((x) => x.table === table && x.name === name)?.def, `${table} ${name}`).toContain(
          `"ListCounter_apply"('${table}')`,
        );
    }
  });
});

describe("an unregistered filter", () => {
  it("gets no counter: its list's total is a count of the matching rows, reported once per filter", () => {
    const reported: string[] = [];
    const previous = setOnUncounted((entity, dim, column) => reported.push(`${entity}.${dim}(${column})`));
    try {
      const tenant = "00000000-0000-4000-8000-000000000001";
      const made = eq(tenant, "Lead", "stageId", "stageId", tenant, "uuid");
      expect(made.counter).toBeUndefined();
      const total = exactTotal(tenant, "Lead", [made]);
      expect(total.sql).toMatch(/^SELECT count\(\*\) FROM "Lead" WHERE/);
      eq(tenant, "Lead", "stageId", "stageId", tenant, "uuid");
      // A registered dim read from another column is not the registered counter either.
      expect(eq(tenant, "Ticket", "status", "statusText", "open", "text").counter).toBeUndefined();
      expect(reported).toEqual(["Lead.stageId(stageId)", "Ticket.status(statusText)"]);
      // A registered one is the counter.
      expect(eq(tenant, "Ticket", "status", "status", "open", "TicketStatus").counter).toBeInstanceOf(Prisma.Sql);
      expect(
        exactTotal(tenant, "Ticket", [eq(tenant, "Ticket", "status", "status", "open", "TicketStatus")]).sql,
      ).toContain('"ListCounter"');
    } finally {
      setOnUncounted(previous);
    }
  });
});
