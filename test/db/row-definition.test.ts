// One definition per resource row (model/row.ts): each resource's columns are declared once,
// and the select list, the row type, the byte budget's sizes and the mapper to the public object come
// from it. Checked here, on both backends:
// - every row definition matches the migrated schema: each own column exists in its table with the
//   SQL type its kind stands for, and a joined column names a real column of a joined table;
// - the select lists read back exactly the declared columns;
// - a row reads the same inside and outside a transaction (instants as ISO text either way);
// - the mappers: 1:1 fields copied, instants made ISO from a Date, ISO text or PostgreSQL's JSON
//   form, composed fields explicit; the import-time checks refuse an unmapped field or column;
// - at compile time (`npx tsc -p .`), the @ts-expect-error lines below: a public field without a
//   column or composed code, a column neither public nor internal, a mismatched type.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { Appointment, AppointmentObject, toAppointment } from "../../model/appointment.js";
import { Contact, ContactObject, toContact } from "../../model/contact.js";
import {
  Conversation,
  ConversationObject,
  Message,
  MessageObject,
  toConversation,
  toMessage,
} from "../../model/conversation.js";
import { toIso } from "../../model/instants.js";
import { Lead, LeadObject, toLead, type LeadRow } from "../../model/lead.js";
import { col, defineRow, type RowDef } from "../../model/row.js";
import { Comment, Ticket, TicketComment, TicketObject, toTicket, toTicketComment } from "../../model/ticket.js";
import { Stage } from "../../model/stage.js";
import { User } from "../../model/user.js";
import { Channel } from "../../model/channel.js";
import { Template } from "../../model/template.js";
import { readFor } from "../../server/db/insert.js";
import { selectConversations } from "../../routers/conversations/schemas.js";
import { selectLeads } from "../../routers/leads/schemas.js";
import { selectTickets } from "../../routers/tickets/schemas.js";
import { startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const DEFS: RowDef<any, any>[] = [
  Lead,
  Contact,
  Conversation,
  Message,
  Appointment,
  Ticket,
  Comment,
  Stage,
  User,
  Channel,
  Template,
];

/** The SQL types (format_type) a column kind stands for; a domain is checked through its base type. */
const SQL_TYPES: Record<string, string[]> = {
  uuid: ["uuid"],
  text: ["text", "character", "character varying"],
  int: ["integer"],
  bool: ["boolean"],
  instant: ["timestamp with time zone"],
  textArray: ["text[]"],
  enum: ["text"],
};
/** A type without its length or precision: `character(2)` → `character`. */
const bare = (type: string) => type.replace(/\(\d+\)/, "");

let app: TestApp;
let ids: any;
const A = () => ids.tenants.acme;

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", {
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@acme.test" }],
        conversations: [
          {
            ref: "c1",
            channel: "wa",
            status: "active",
            assignedTo: "ana",
            identity: { externalId: "34600000001", name: "Bea", phone: null, email: null, contact: "bea" },
            messages: [{ role: "user", content: "Hi!", createdAt: "2026-02-01T00:00:00.123Z" }],
          },
        ],
        leads: [
          {
            ref: "l1",
            customerName: "Bea Soto",
            stage: "new",
            contact: "bea",
            budget: { min: 1, max: null },
            zones: ["a"],
            createdAt: "2026-03-01T00:00:00.001Z",
          },
        ],
        appointments: [
          {
            ref: "a1",
            assignedTo: "ana",
            title: "Viewing",
            appointmentType: "visit",
            startsAt: "2030-03-04T10:00:00Z",
            endsAt: "2030-03-04T11:00:00Z",
          },
        ],
        tickets: [
          {
            ref: "t1",
            subject: "Broken",
            createdBy: "ana",
            contact: "bea",
            comments: [{ author: "ana", body: "On it" }],
          },
        ],
      } as any),
    ),
  );
});
afterAll(() => app?.close());

describe("row definitions against the migrated schema", () => {
  it("every own column exists in its table with the SQL type of its kind; a joined column names a real column", async () => {
    const rows = await app.db.sql.query<{ table: string; name: string; type: string; base: string }>(`
      SELECT c."relname" AS "table", a."attname" AS "name", format_type(a."atttypid", a."atttypmod") AS "type",
             format_type(coalesce(nullif(t."typbasetype", 0), a."atttypid"), a."atttypmod") AS "base"
        FROM pg_attribute a JOIN pg_class c ON c."oid" = a."attrelid" JOIN pg_type t ON t."oid" = a."atttypid"
       WHERE c."relnamespace" = current_schema()::regnamespace AND c."relkind" = 'r' AND a."attnum" > 0 AND NOT a."attisdropped"`);
    const typeOf = (table: string, name: string) => rows.find((r) => r.table === table && r.name === name);
    const problems: string[] = [];
    for (const def of DEFS)
      for (const name of def.names) {
        const column = def.columns[name]!;
        let table = def.table;
        let real = name;
        if (column.expr) {
          // A joined column: `alias."column"` of the tables the resource's select joins.
          const m = /^(\w+)\."(\w+)"$/.exec(column.expr);
          table = ({ ch: "Channel", cu: "Customer" } as Record<string, string>)[m?.[1] ?? ""] ?? "?";
          real = m?.[2] ?? "?";
        }
        const found = typeOf(table, real);
        if (!found) problems.push(`${def.table}.${name}: no column ${table}.${real}`);
        else if (
          !SQL_TYPES[column.kind]!.includes(bare(found.type)) &&
          !SQL_TYPES[column.kind]!.includes(bare(found.base))
        )
          problems.push(`${def.table}.${name}: ${column.kind} but ${found.type} (${found.base})`);
      }
    expect(problems).toEqual([]);
  });

  it("each select list reads back exactly the declared columns, in order", async () => {
    const t = A().id;
    const read = readFor(app.db, app.db.prisma, { isoTimes: true });
    const keys = async (q: Prisma.Sql) => Object.keys((await read<Record<string, unknown>>(q))[0] ?? {});
    expect(await keys(selectLeads(t, Prisma.sql`SELECT "id" FROM "Lead" WHERE "tenantId" = ${t}::uuid`))).toEqual(
      Lead.names,
    );
    expect(await keys(Prisma.sql`SELECT ${Contact.select()} FROM "Contact" WHERE "tenantId" = ${t}::uuid`)).toEqual(
      Contact.names,
    );
    expect(
      await keys(Prisma.sql`SELECT ${Appointment.select()} FROM "Appointment" WHERE "tenantId" = ${t}::uuid`),
    ).toEqual(Appointment.names);
    expect(await keys(Prisma.sql`SELECT ${Message.select()} FROM "Message" WHERE "tenantId" = ${t}::uuid`)).toEqual(
      Message.names,
    );
    expect(
      await keys(selectConversations(t, Prisma.sql`SELECT * FROM "Conversation" WHERE "tenantId" = ${t}::uuid`)),
    ).toEqual(Conversation.names);
    expect(await keys(selectTickets(t, Prisma.sql`SELECT * FROM "Ticket" WHERE "tenantId" = ${t}::uuid`))).toEqual([
      ...Ticket.names,
      "comments",
    ]);
    expect(Lead.select("l").text).toBe(Lead.names.map((n) => `l."${n}"`).join(", "));
    expect(Conversation.select("v").text).toContain(`cu."name" AS "customerName"`);
    // Built once per alias: the same statement text, the same prepared statement.
    expect(Lead.select("l")).toBe(Lead.select("l"));
  });

  it("a row reads the same inside and outside a transaction: instants as ISO text either way", async () => {
    const t = A().id;
    const q = selectTickets(t, Prisma.sql`SELECT * FROM "Ticket" WHERE "tenantId" = ${t}::uuid`);
    const leads = selectLeads(t, Prisma.sql`SELECT "id" FROM "Lead" WHERE "tenantId" = ${t}::uuid`);
    const outside = await readFor(app.db, app.db.prisma, { isoTimes: true })<Record<string, unknown>>(leads);
    const inside = await app.db.prisma.$transaction((tx) =>
      readFor(app.db, tx, { isoTimes: true })<Record<string, unknown>>(leads),
    );
    expect(outside.length).toBe(1);
    expect(inside).toEqual(outside);
    expect(outside[0]!.createdAt).toBe("2026-03-01T00:00:00.001Z");
    expect(typeof inside[0]!.updatedAt).toBe("string");
    const tickets = await app.db.prisma.$transaction((tx) =>
      readFor(app.db, tx, { isoTimes: true })<Record<string, unknown>>(q),
    );
    expect(tickets).toEqual(await readFor(app.db, app.db.prisma, { isoTimes: true })<Record<string, unknown>>(q));
  });

  it("a lead mapped from Prisma's model row equals the same lead mapped from the list's row", async () => {
    const t = A().id;
    const [row] = await readFor(app.db, app.db.prisma, { isoTimes: true })<LeadRow>(
      selectLeads(t, Prisma.sql`SELECT "id" FROM "Lead" WHERE "tenantId" = ${t}::uuid`),
    );
    const model = await app.db.prisma.lead.findFirstOrThrow({ where: { tenantId: t } });
    expect(model.createdAt).toBeInstanceOf(Date);
    expect(toLead(model)).toEqual(toLead(row!));
    expect(toLead(row!)).toMatchObject({
      budget: { min: 1, max: null },
      zones: ["a"],
      createdAt: "2026-03-01T00:00:00.001Z",
    });
    expect(Lead.parse(model).createdAt).toBe("2026-03-01T00:00:00.001Z");
    // A ticket's thread from the list's JSON maps like Prisma's include.
    const [thread] = await readFor(app.db, app.db.prisma, { isoTimes: true })<any>(
      selectTickets(t, Prisma.sql`SELECT * FROM "Ticket" WHERE "tenantId" = ${t}::uuid`),
    );
    const included = await app.db.prisma.ticket.findFirstOrThrow({
      where: { tenantId: t },
      include: { comments: true },
    });
    expect(
      toTicket({
        ...thread,
        comments: typeof thread.comments === "string" ? JSON.parse(thread.comments) : thread.comments,
      }),
    ).toEqual(toTicket(included));
  });
});

describe("the mapper", () => {
  const Thing = defineRow("Thing", {
    id: col.uuid(),
    a: col.int().nullable(),
    at: col.instant().nullable(),
    kind: col.enum(["x", "yy"] as const),
    lo: col.int(),
    hi: col.int(),
  });
  const ThingObject = z.object({
    id: z.string(),
    at: z.iso.datetime().nullable(),
    kind: z.enum(["x", "yy"]),
    a: z.number().nullable(),
    range: z.array(z.number()),
  });
  const toThing = Thing.toPublic(ThingObject, { composed: { range: (r) => [r.lo, r.hi] }, internal: ["lo", "hi"] });

  it("copies 1:1 fields in the public object's order, makes instants ISO, runs composed code", () => {
    const row = { id: "i", a: null, at: "2026-11-20T08:00:00.000Z", kind: "yy", lo: 1, hi: 2, extra: "ignored" };
    expect(JSON.stringify(toThing(row))).toBe(
      `{"id":"i","at":"2026-11-20T08:00:00.000Z","kind":"yy","a":null,"range":[1,2]}`,
    );
    expect(toThing({ ...row, at: new Date("2026-11-20T08:00:00.123Z") }).at).toBe("2026-11-20T08:00:00.123Z");
    expect(toThing({ ...row, at: "2026-11-20T08:00:00.12+00:00" }).at).toBe("2026-11-20T08:00:00.120Z");
    expect(toThing({ ...row, at: null }).at).toBeNull();
  });

  it("toIso: ISO text as is, a Date or PostgreSQL's JSON form formatted", () => {
    const iso = "0001-01-01T00:00:00.000Z";
    expect(toIso(iso)).toBe(iso);
    expect(toIso(new Date(iso))).toBe(iso);
    expect(toIso("2026-11-20T08:00:00+00:00")).toBe("2026-11-20T08:00:00.000Z");
    expect(toIso("2026-11-20T09:00:00.5+01:00")).toBe("2026-11-20T08:00:00.500Z");
    expect(toIso(null)).toBeNull();
  });

  it("refuses at import a public field that is neither a column nor composed, an unmapped column, a stray composed", () => {
    const More = ThingObject.extend({ b: z.string() });
    // @ts-expect-error b is a public field with no column and no composed code
    expect(() => Thing.toPublic(More, { composed: { range: (r) => [r.lo, r.hi] }, internal: ["lo", "hi"] })).toThrow(
      /public field b is neither a column nor composed/,
    );
    // @ts-expect-error hi is neither public nor listed in internal
    expect(() => Thing.toPublic(ThingObject, { composed: { range: (r) => [r.lo, r.hi] }, internal: ["lo"] })).toThrow(
      /column hi is not mapped/,
    );
    expect(() =>
      // @ts-expect-error `nope` is not a public field
      Thing.toPublic(ThingObject, { composed: { range: (r) => [r.lo, r.hi], nope: () => 1 }, internal: ["lo", "hi"] }),
    ).toThrow(/composed nope is not a public field/);
    const Narrow = ThingObject.extend({ a: z.number() });
    expect(() =>
      // @ts-expect-error a is nullable in the row but not in the public object: it must be composed
      Thing.toPublic(Narrow, { composed: { range: (r) => [r.lo, r.hi] }, internal: ["lo", "hi"] }),
    ).not.toThrow();
  });

  it("each resource's mapper gives every field of its public object, in its order, valid against it", () => {
    const resources: [RowDef<any, any>, (r: any) => unknown, z.ZodObject<any>, object?][] = [
      [Lead, toLead, LeadObject],
      [Contact, toContact, ContactObject],
      [Conversation, toConversation, ConversationObject],
      [Message, toMessage, MessageObject],
      [Appointment, toAppointment, AppointmentObject],
      [Ticket, toTicket, TicketObject, { comments: [] }],
      [Comment, toTicketComment, TicketComment],
    ];
    for (const [def, map, object, extra] of resources) {
      const item = map({ ...def.widest(), ...extra }) as object;
      expect(Object.keys(item), def.table).toEqual(Object.keys(object.shape));
      expect(object.safeParse(item).success, def.table).toBe(true);
    }
    expect(toLead(Lead.widest()).budget).toEqual({ min: -2_147_483_648, max: -2_147_483_648 });
  });
});
