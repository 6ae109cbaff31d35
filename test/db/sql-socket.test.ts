// The embedded database over SQL (server/db/sql-socket.ts): a client of the socket and the service
// share PGlite's one connection through a gate, so neither's statements run inside the other's
// transaction. Forced, not timed: the service's write is issued while the client's transaction is
// open and then rolled back; had the write run inside it, it would be gone. Embedded database only.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { SqlSocket } from "../../server/db/sql-socket.js";
import { freshDatabase, type TestDb } from "../helpers/app.js";

let testDb: TestDb;
let socket: SqlSocket | undefined;
beforeAll(async () => {
  testDb = await freshDatabase();
  socket = await testDb.db.serveSql?.(0);
}, 60_000);
afterAll(async () => {
  await socket?.close();
  await testDb?.drop();
});

it.skipIf(process.env.DATABASE_URL)(
  "a client's transaction and the service's statements never mix; a client's error stays its own",
  async () => {
    const db = testDb.db;
    await db.sql.exec("CREATE TABLE gate_probe (who text)");
    const client = new pg.Client({ connectionString: socket!.url });
    await client.connect();
    try {
      // The service writes while the client's transaction is open; the client rolls back.
      await client.query("BEGIN");
      await client.query("INSERT INTO gate_probe VALUES ('client')");
      const service = db.sql.query("INSERT INTO gate_probe VALUES ('service')");
      const serviceTx = db.prisma.$transaction(async (tx) => {
        await tx.$executeRawUnsafe("INSERT INTO gate_probe VALUES ('service tx')");
      });
      await client.query("ROLLBACK");
      await Promise.all([service, serviceTx]);
      const rows = await db.sql.query<{ who: string }>("SELECT who FROM gate_probe ORDER BY who");
      expect(rows.map((r) => r.who)).toEqual(["service", "service tx"]);

      // A client's failed statement aborts its own transaction only.
      await client.query("BEGIN");
      await expect(client.query("SELECT * FROM no_such_table")).rejects.toThrow(/no_such_table/);
      const after = db.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM gate_probe");
      await client.query("ROLLBACK");
      expect((await after)[0]!.n).toBe(2);

      // Parameterized statements (Parse, Bind, Execute, Sync) of the client and the service's, at once.
      const both = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          i % 2
            ? client.query<{ v: number }>("SELECT $1::int AS v", [i]).then((r) => r.rows[0]!.v)
            : db.sql.query<{ v: number }>("SELECT $1::int + 0 AS v", [i]).then((r) => r[0]!.v),
        ),
      );
      expect(both).toEqual(Array.from({ length: 20 }, (_, i) => i));
    } finally {
      await client.end();
    }
  },
);
