// Once per vitest run, before any test file: the migrated database every file's freshDatabase()
// starts from (test/helpers/app.ts), so that no file pays for the migrations (and, on Citus, the
// extension, the node registration and the distribution) again:
//   embedded (no DATABASE_URL)  a migrated PGlite data folder as a tarball in a temporary file;
//                               each file's in-memory PGlite starts from it (no initdb, no migrations)
//   PostgreSQL                  a migrated template database; each file's is CREATE DATABASE … TEMPLATE
//   Citus                       a pool of the run's databases (test/helpers/citus-pool.ts): Citus
//                               supports no template but template1 (its maintenance daemon stays
//                               connected to every Citus database), so a database is created on every
//                               node, migrated and distributed only when none of the pool is free; a
//                               file's database goes back emptied when it is still pristine
// The migrations themselves stay tested from an empty database (test/db/schema.test.ts, the process
// tests' npm start and db:migrate). Global setups of several projects share one result (globalThis).
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { openPglite } from "../../server/db/client.js";
import { migrate } from "../../server/db/migrate.js";
import { citusCluster } from "./cluster.js";
import { forget, preparePool } from "./citus-pool.js";
import {
  createTemplateDatabase,
  directBaseUrl,
  dropDatabase,
  dropTemplateDatabase,
  type Template,
} from "./template.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The migrated PGlite data folder's tarball (embedded runs). */
    pgliteSnapshot: string;
    /** The migrated template database (PostgreSQL runs). */
    templateDatabase: string;
    /** The run's name in the pool of distributed databases (Citus runs). */
    citusPoolRun: string;
  }
}

interface Prepared {
  snapshot?: string;
  template?: Template;
  citusPoolRun?: string;
  teardown(): Promise<void>;
}

const store = globalThis as { crmTestSetup?: Promise<Prepared>; crmTestSetupUsers?: number };

async function prepare(): Promise<Prepared> {
  if (!process.env.DATABASE_URL) {
    const dir = mkdtempSync(path.join(tmpdir(), "crm-test-snapshot-"));
    const db = await openPglite("memory://");
    try {
      await migrate(db.sql);
      const tar = await db.dumpDataDir!();
      const file = path.join(dir, "migrated.tar");
      writeFileSync(file, Buffer.from(await tar.arrayBuffer()));
      return { snapshot: file, teardown: async () => rmSync(dir, { recursive: true, force: true }) };
    } finally {
      await db.close();
    }
  }
  const cluster = await citusCluster(directBaseUrl()!);
  if (cluster) {
    const base = directBaseUrl()!;
    await preparePool(base, cluster);
    const run = `run_${randomBytes(5).toString("hex")}`;
    return {
      citusPoolRun: run,
      teardown: async () => {
        for (const name of await forget(base, cluster, run)) await dropDatabase(cluster, name);
      },
    };
  }
  const template = await createTemplateDatabase();
  return { template, teardown: () => dropTemplateDatabase(template) };
}

export default async function setup(project: TestProject) {
  store.crmTestSetup ??= prepare();
  store.crmTestSetupUsers = (store.crmTestSetupUsers ?? 0) + 1;
  const prepared = await store.crmTestSetup;
  if (prepared.snapshot) project.provide("pgliteSnapshot", prepared.snapshot);
  if (prepared.template) project.provide("templateDatabase", prepared.template.name);
  if (prepared.citusPoolRun) project.provide("citusPoolRun", prepared.citusPoolRun);
  return async () => {
    store.crmTestSetupUsers! -= 1;
    if (store.crmTestSetupUsers === 0) await prepared.teardown();
  };
}
