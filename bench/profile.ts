// Summary of a V8 CPU profile (node --cpu-prof): self time by function and by package, so that the
// results file can say where the service's CPU goes. Usable alone: tsx bench/profile.ts FILE.cpuprofile
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

function bucket(url: string): string {
  if (!url) return "(native / V8)";
  if (url.startsWith("wasm://")) return "wasm (Prisma query compiler)";
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + "node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith("node:")) return "node core";
  const m = /\/(?:dist\/)?(server|routers|rest|generated|bench)\//.exec(url);
  // Other files of the build (its shared chunks) by their path in the repository, not the machine's.
  return m ? `app: ${m[1]}/` : url.replace(/^file:\/\//, "").replace(/^.*\/(dist\/)/, "$1");
}

export function summarizeProfile(
  file: string,
  top = 25,
  skipMs = 0,
): { byPackage: [string, number][]; byFunction: [string, number][]; totalMs: number } {
  const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  // Self time per node from samples × time deltas (more exact than hitCount × interval); the samples
  // of the first skipMs (the process's start: module loading) are left out.
  const self = new Map<number, number>();
  if (p.samples && p.timeDeltas) {
    let at = 0;
    for (let i = 0; i < p.samples.length; i++) {
      at += (p.timeDeltas[i] ?? 0) / 1000;
      if (at < skipMs) continue;
      self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000);
    }
  }
  let total = 0;
  const pkg = new Map<string, number>();
  const fn = new Map<string, number>();
  for (const [id, ms] of self) {
    const n = byId.get(id)!;
    const name = n.callFrame.functionName || "(anonymous)";
    if (name === "(idle)") continue;
    total += ms;
    const b =
      name === "(garbage collector)"
        ? "(garbage collector)"
        : name === "(program)"
          ? "(program)"
          : bucket(n.callFrame.url);
    pkg.set(b, (pkg.get(b) ?? 0) + ms);
    const short = n.callFrame.url
      ? `${name} ` +
        `${n.callFrame.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*\/main\//, "")}:${n.callFrame.lineNumber + 1}`
      : name;
    fn.set(short, (fn.get(short) ?? 0) + ms);
  }
  const sort = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  return { byPackage: sort(pkg), byFunction: sort(fn), totalMs: total };
}

/**
 * The flame summary's groups: where a package's self time is charged. Prisma includes the
 * generated client (generated/) and the query compiler's wasm; "node internals" are node core, V8's
 * native code and the garbage collector.
 */
export function group(bucket: string): string {
  if (
    bucket === "express" ||
    [
      "body-parser",
      "router",
      "send",
      "serve-static",
      "finalhandler",
      "qs",
      "raw-body",
      "iconv-lite",
      "content-type",
      "path-to-regexp",
      "on-finished",
      "depd",
      "debug",
      "type-is",
      "mime-types",
      "negotiator",
      "accepts",
      "etag",
      "fresh",
      "cookie",
      "vary",
      "proxy-addr",
      "parseurl",
      "merge-descriptors",
      "utils-merge",
      "methods",
      "statuses",
      "http-errors",
      "encodeurl",
      "escape-html",
      "range-parser",
      "forwarded",
      "ipaddr.js",
      "media-typer",
      "bytes",
      "unpipe",
      "ee-first",
      "destroy",
      "toidentifier",
      "setprototypeof",
      "safe-buffer",
      "safer-buffer",
      "inherits",
      "side-channel",
      "object-inspect",
      "call-bind",
      "get-intrinsic",
      "function-bind",
      "has-symbols",
      "hasown",
      "es-errors",
      "gopd",
      "es-define-property",
    ].includes(bucket)
  )
    return "express (and its dependencies)";
  if (
    bucket === "trpc-to-openapi" ||
    bucket === "openapi3-ts" ||
    bucket === "co-body" ||
    bucket === "h3" ||
    bucket === "lodash.clonedeep"
  )
    return "trpc-to-openapi";
  if (bucket.startsWith("@trpc/")) return "@trpc/server";
  if (bucket === "zod" || bucket === "zod-openapi") return "zod";
  if (bucket.startsWith("@prisma/") || bucket === "prisma" || bucket === "app: generated/" || bucket.startsWith("wasm"))
    return "prisma (client, query compiler, adapter)";
  if (
    bucket === "pg" ||
    bucket.startsWith("pg-") ||
    bucket === "postgres-array" ||
    bucket === "postgres-date" ||
    bucket === "postgres-interval" ||
    bucket === "postgres-bytea"
  )
    return "pg (driver)";
  if (
    bucket === "pino" ||
    bucket.startsWith("pino-") ||
    bucket === "sonic-boom" ||
    bucket === "fast-redact" ||
    bucket === "thread-stream" ||
    bucket === "atomic-sleep" ||
    bucket === "quick-format-unescaped" ||
    bucket === "on-exit-leak-free" ||
    bucket === "safe-stable-stringify" ||
    bucket === "@pinojs/redact"
  )
    return "pino";
  if (
    bucket === "ioredis" ||
    bucket === "rate-limiter-flexible" ||
    bucket === "redis-parser" ||
    bucket === "denque" ||
    bucket === "cluster-key-slot" ||
    bucket === "standard-as-callback" ||
    bucket === "redis-errors"
  )
    return "redis (ioredis, rate limits)";
  if (bucket === "prom-client" || bucket === "tdigest" || bucket === "bintrees") return "prom-client";
  if (bucket === "libphonenumber-js" || bucket === "luxon") return "libphonenumber-js / luxon";
  if (bucket === "tsx" || bucket === "esbuild" || bucket === "get-tsconfig") return "tsx (loader)";
  if (bucket.startsWith("app: ")) return "app code (server/, routers/, rest/)";
  if (
    bucket === "node core" ||
    bucket === "(native / V8)" ||
    bucket === "(garbage collector)" ||
    bucket === "(program)"
  )
    return "node internals (core, V8, GC)";
  return "other";
}

export function profileMarkdown(file: string, caption?: string, skipMs = 0): string {
  const s = summarizeProfile(file, 1000, skipMs);
  const pct = (ms: number) => ((100 * ms) / s.totalMs).toFixed(1);
  const groups = new Map<string, number>();
  for (const [k, v] of s.byPackage) groups.set(group(k), (groups.get(group(k)) ?? 0) + v);
  const lines = [`${caption ? `${caption} ` : ""}Busy (non-idle) CPU sampled: ${(s.totalMs / 1000).toFixed(1)} s.`, ""];
  lines.push("| self time by group | ms | % |", "|---|---:|---:|");
  for (const [k, v] of [...groups.entries()].sort((a, b) => b[1] - a[1]))
    lines.push(`| ${k} | ${v.toFixed(0)} | ${pct(v)} |`);
  lines.push("", "| self time by package (top 25) | ms | % |", "|---|---:|---:|");
  s.byPackage = s.byPackage.slice(0, 25);
  s.byFunction = s.byFunction.slice(0, 25);
  for (const [k, v] of s.byPackage) lines.push(`| ${k} | ${v.toFixed(0)} | ${pct(v)} |`);
  lines.push("", "| self time by function (top 25) | ms | % |", "|---|---:|---:|");
  for (const [k, v] of s.byFunction) lines.push(`| \`${k.replace(/\|/g, "\\|")}\` | ${v.toFixed(0)} | ${pct(v)} |`);
  return lines.join("\n");
}

if (process.argv[1]?.endsWith("profile.ts") && process.argv[2])
  process.stdout.write(`${profileMarkdown(process.argv[2])}\n`);
