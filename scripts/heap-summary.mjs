// Summarises a V8 heap snapshot (node --heapsnapshot-signal=SIGHUP, v8.writeHeapSnapshot()):
// self size by node type, then the largest constructors / strings / code by self size.
//   node scripts/heap-summary.mjs FILE.heapsnapshot [TOP=25]
import { readFileSync } from "node:fs";

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: node scripts/heap-summary.mjs FILE.heapsnapshot [TOP]\n");
  process.exit(2);
}
const top = Number(topArg || 25);
const snap = JSON.parse(readFileSync(file, "utf8"));
const meta = snap.snapshot.meta;
const F = meta.node_fields;
const types = meta.node_types[0];
const width = F.length;
const iType = F.indexOf("type"),
  iName = F.indexOf("name"),
  iSize = F.indexOf("self_size");
const byType = new Map();
const byName = new Map();
const nodes = snap.nodes;
let total = 0;
for (let i = 0; i < nodes.length; i += width) {
  const type = types[nodes[i + iType]];
  const size = nodes[i + iSize];
  total += size;
  byType.set(type, (byType.get(type) ?? 0) + size);
  let name = snap.strings[nodes[i + iName]];
  if (type === "string" || type === "concatenated string" || type === "sliced string") name = "(strings)";
  else if (type === "code") name = `(code) ${name.slice(0, 40)}`;
  else name = `${type}: ${name.slice(0, 60)}`;
  const e = byName.get(name) ?? { size: 0, count: 0 };
  e.size += size;
  e.count++;
  byName.set(name, e);
}
const mb = (n) => (n / 1048576).toFixed(1);
const out = [`total self size ${mb(total)} MiB in ${nodes.length / width} nodes`, "", "by type (MiB):"];
for (const [t, s] of [...byType].sort((a, b) => b[1] - a[1])) out.push(`  ${mb(s).padStart(7)}  ${t}`);
out.push("", `top ${top} by self size (MiB, count):`);
for (const [n, e] of [...byName].sort((a, b) => b[1].size - a[1].size).slice(0, top))
  out.push(`  ${mb(e.size).padStart(7)} ${String(e.count).padStart(8)}  ${n}`);
process.stdout.write(`${out.join("\n")}\n`);
