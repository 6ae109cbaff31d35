// The production build: esbuild bundles the service's own TypeScript (server/, routers/, rest/ and
// the generated Prisma client) into dist/server/main.js with a linked source map
// (dist/server/main.js.map, sources as paths to the .ts files, no sources content); every package
// under node_modules stays an import (packages: "external"), resolved at run time as under tsx.
// Run as `node --enable-source-maps dist/server/main.js` (npm start). The operator's commands are
// entry points of the same build (ENTRIES: the admin CLI, db:migrate, db:distribute), the code they
// share with the service in common chunks: `npm run admin` starts in a tenth of tsx's time, which
// compiled the service's sources on every run.
//
//   node scripts/build.mjs            builds (about a second)
//   node scripts/build.mjs --if-stale builds only when dist/ is missing or older than an input
//
// Plain JavaScript so that npm ci's postinstall can run it without tsx. Staleness: the build
// writes dist/meta.json (esbuild's metafile: every input it read); dist is stale when that file is
// missing, an input is newer than it or gone, or this script, package.json or the lock file is newer.
// scripts/ensure-build.ts wraps this for the drills and the benchmark.
//
// Prisma's query compiler (WebAssembly) ships as a base64 string module: loaded as is, its source
// and the decoded string stay on the V8 heap for the life of the process (~9 MiB). The build writes
// the binary once to dist/query_compiler.wasm and the bundled client reads that file instead
// (prismaWasmFromFile below; when the generated loader does not look as expected, the bundle keeps
// the base64 module: correct, only bigger).
import { existsSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const DIST = path.join(ROOT, "dist");
export const ENTRY = path.join(DIST, "server", "main.js");
/** The build's entry points: the service, then the operator's commands (package.json's scripts run their .js). */
export const ENTRIES = [
  "server/main.ts",
  "server/admin/cli.ts",
  "server/db/migrate-cli.ts",
  "server/db/distribute-cli.ts",
];
const META = path.join(DIST, "meta.json");
const WASM_FILE = "query_compiler.wasm";
const WASM_BASE64_MODULE = "@prisma/client/runtime/query_compiler_fast_bg.postgresql.wasm-base64.mjs";
/** The generated client's loader of the compiler: import the base64 module, decode, compile. */
const WASM_LOADER =
  /const \{ wasm \} = await import\("@prisma\/client\/runtime\/query_compiler_fast_bg\.postgresql\.wasm-base64\.mjs"\)\s*return await decodeBase64AsWasm\(wasm\)/;

/** esbuild plugin: the generated client compiles dist/query_compiler.wasm (see the top of the file). */
const prismaWasmFromFile = (outdir) => ({
  name: "prisma-wasm-from-file",
  setup(b) {
    b.onLoad({ filter: /generated[\\/]prisma[\\/]internal[\\/]class\.ts$/ }, async (args) => {
      const source = readFileSync(args.path, "utf8");
      if (!WASM_LOADER.test(source)) {
        return {
          contents: source,
          loader: "ts",
          warnings: [{ text: "Prisma's wasm loader changed shape: keeping the base64 module" }],
        };
      }
      const { wasm } = await import(WASM_BASE64_MODULE);
      writeFileSync(path.join(outdir, WASM_FILE), Buffer.from(wasm, "base64"));
      const contents = source.replace(
        WASM_LOADER,
        `const { readFile } = await import("node:fs/promises")\n    return new WebAssembly.Module(await readFile(new URL("../${WASM_FILE}", import.meta.url)))`,
      );
      return { contents, loader: "ts" };
    });
  },
});
/** Besides the bundled sources: what changes the output without being an input of the bundle. */
const EXTRA_INPUTS = ["scripts/build.mjs", "package.json", "package-lock.json"];

/** Why dist/ must be rebuilt, or undefined when it is up to date. */
export function staleReason() {
  if (!existsSync(ENTRY) || !existsSync(META)) return "dist/ missing";
  const built = statSync(META).mtimeMs;
  let inputs;
  try {
    inputs = Object.keys(JSON.parse(readFileSync(META, "utf8")).inputs);
  } catch {
    return "dist/meta.json unreadable";
  }
  for (const rel of [...inputs, ...EXTRA_INPUTS]) {
    const file = path.join(ROOT, rel);
    if (!existsSync(file)) {
      if (EXTRA_INPUTS.includes(rel)) continue;
      return `${rel} gone`;
    }
    if (statSync(file).mtimeMs > built) return `${rel} changed`;
  }
  return undefined;
}

/**
 * Bundles the service into dist/ (replacing it). Resolves once written. Built into a sibling
 * folder at the same depth (so the source map's relative paths hold) and then renamed into
 * place: a process starting meanwhile finds the old build or the new one (or, for the instant
 * between the two renames, none), never half of one.
 */
export async function build() {
  const esbuild = await import("esbuild");
  const started = Date.now();
  const tmp = `${DIST}.tmp-${process.pid}-${started}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const result = await esbuild.build({
      absWorkingDir: ROOT,
      entryPoints: ENTRIES,
      outbase: ".",
      outdir: tmp,
      bundle: true,
      splitting: true, // dynamic import() of our own modules becomes a chunk loaded on first use
      chunkNames: "chunks/[name]-[hash]",
      format: "esm",
      platform: "node",
      target: "node20",
      packages: "external",
      sourcemap: "linked",
      sourcesContent: false, // the .ts files are in the checkout; keeps the map (held in memory) small
      metafile: true,
      logLevel: "warning",
      legalComments: "none",
      plugins: [prismaWasmFromFile(tmp)],
    });
    writeFileSync(path.join(tmp, "meta.json"), JSON.stringify(result.metafile));
    const old = `${tmp}.old`;
    if (existsSync(DIST)) renameSync(DIST, old);
    renameSync(tmp, DIST);
    rmSync(old, { recursive: true, force: true });
    return { ms: Date.now() - started, inputs: Object.keys(result.metafile.inputs).length };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const ifStale = process.argv.includes("--if-stale");
  const reason = staleReason();
  if (ifStale && !reason) process.exit(0);
  try {
    const { ms, inputs } = await build();
    process.stderr.write(
      `build: dist/server/main.js from ${inputs} files in ${ms} ms${reason && ifStale ? ` (${reason})` : ""}\n`,
    );
  } catch (err) {
    process.stderr.write(`build failed: ${err?.message ?? err}\n`);
    process.exit(1);
  }
}
