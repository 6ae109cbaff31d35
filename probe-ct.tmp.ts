import { openPglite, openPostgres } from "/work/main/server/db/client.js";
import { migrate } from "/work/main/server/db/migrate.js";
import { dbViolation } from "/work/main/server/db/errors.js";
import pg from "pg";
async function run(db: any) {
  await migrate(db.sql);
  const t = await db.prisma.tenant.findFirst();
  const [ten] = await db.sql.query(`INSERT INTO "Tenant" (id, name, plan) VALUES (gen_random_uuid(), 'x', 'pro') RETURNING id`).catch(async (e: any) => { console.log(e.message); return [null]; });
  if (!ten) return;
  const tenantId = ten.id;
  await db.prisma.contact.create({ data: { tenantId, phone: "+1", email: "A@x.com", fullName: "50% off" } });
  await db.prisma.contact.create({ data: { tenantId, phone: "+2", email: "b@x.com", fullName: "500 off" } });
  const r = await db.prisma.contact.findMany({ where: { tenantId, fullName: { contains: "0%", mode: "insensitive" } } });
  console.log("contains 0% ->", r.map((x: any) => x.fullName));
  for (const data of [{ tenantId, phone: "+1" }, { tenantId, phone: "+3", email: "a@X.com" }]) {
    try { await db.prisma.contact.create({ data }); } catch (e: any) { console.log(e.code, JSON.stringify(e.meta), dbViolation(e)); }
  }
  try { await db.prisma.contact.updateMany({ where: { tenantId, phone: "+2" }, data: { email: "a@x.COM" } }); } catch (e: any) { console.log("upd", e.code, dbViolation(e)); }
}
const lite = await openPglite("memory://");
await run(lite); await lite.close();
const base = "postgresql://postgres@127.0.0.1:5432/postgres";
const a = new pg.Client({ connectionString: base }); await a.connect(); await a.query("DROP DATABASE IF EXISTS probe_ct"); await a.query("CREATE DATABASE probe_ct"); await a.end();
const p = await openPostgres("postgresql://postgres@127.0.0.1:5432/probe_ct");
await run(p); await p.close();
const b = new pg.Client({ connectionString: base }); await b.connect(); await b.query("DROP DATABASE probe_ct WITH (FORCE)"); await b.end();
