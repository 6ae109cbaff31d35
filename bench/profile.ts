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
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + "node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith("node:")) return "node core";
  const m = /\/(server|routers|rest|generated|bench)\//.exec(url);
  return m ? `app: ${m[1]}/` : url.replace(/^file:\/\//, "");
}

export function summarizeProfile(file: string, top = 25): { byPackage: [string, number][]; byFunction: [string, number][]; totalMs: number } {
  const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  // Self time per node from samples × time deltas (more exact than hitCount × interval).
  const self = new Map<number, number>();
  if (p.samples && p.timeDeltas) {
    for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000);
  }
  let total = 0;
  const pkg = new Map<string, number>();
  const fn = new Map<string, number>();
  for (const [id, ms] of self) {
    const n = byId.get(id)!;
    const name = n.callFrame.functionName || "(anonymous)";
    if (name === "(idle)") continue;
    total += ms;
    const b = name === "(garbage collector)" ? "(garbage collector)" : name === "(program)" ? "(program)" : bucket(n.callFrame.url);
    pkg.set(b, (pkg.get(b) ?? 0) + ms);
    const short = n.callFrame.url ? `${name} ${n.callFrame.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*\/main\//, "")}:${n.callFrame.lineNumber + 1}` : name;
    fn.set(short, (fn.get(short) ?? 0) + ms);
  }
  const sort = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  return { byPackage: sort(pkg), byFunction: sort(fn), totalMs: total };
}

export function profileMarkdown(file: string): string {
  const s = summarizeProfile(file);
  const pct = (ms: number) => ((100 * ms) / s.totalMs).toFixed(1);
  const lines = [`Busy (non-idle) CPU sampled: ${(s.totalMs / 1000).toFixed(1)} s.`, "", "| self time by package | ms | % |", "|---|---:|---:|"];
  for (const [k, v] of s.byPackage) lines.push(`| ${k} | ${v.toFixed(0)} | ${pct(v)} |`);
  lines.push("", "| self time by function (top 25) | ms | % |", "|---|---:|---:|");
  for (const [k, v] of s.byFunction) lines.push(`| \`${k.replace(/\|/g, "\\|")}\` | ${v.toFixed(0)} | ${pct(v)} |`);
  return lines.join("\n");
}

if (process.argv[1]?.endsWith("profile.ts") && process.argv[2]) process.stdout.write(profileMarkdown(process.argv[2]) + "\n");
