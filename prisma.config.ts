import { defineConfig } from "prisma/config";

// Prisma 7 reads the connection string from here (only Prisma Studio uses it: migrations are
// applied by server/db/migrate.ts and the runtime uses driver adapters).
export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres" },
});
