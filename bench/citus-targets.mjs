// The supported design's targets over a Citus bench report (bench/citus.ts's JSON): for every scenario
// p50 at 1 connection within single-node p50 + 2 ms, reads ≥ 0.5 and writes ≥ 0.4 of single-node
// throughput at 1 and 32 connections, database ms per request (every node) at 1 connection, and list
// growth (largest ÷ smallest size) ≤ 1.5× on the cluster. Prints a Markdown table; with two files, the
// first as "before" beside the second.
//   node bench/citus-targets.mjs AFTER.json [BEFORE.json]
import { readFileSync } from "node:fs";

const [afterFile, beforeFile] = process.argv.slice(2);
const load = (f) => JSON.parse(readFileSync(f, "utf8"));
const after = load(afterFile);
const before = beforeFile ? load(beforeFile) : undefined;
const run = (pair, target, conns) => pair.runs.find((r) => r.target === target && r.connections === conns);
const f1 = (x) => (x === undefined ? "–" : x.toFixed(1));
const f2 = (x) => (x === undefined ? "–" : x.toFixed(2));

let met = 0;
let all = 0;
const check = (ok) => {
  all++;
  if (ok) met++;
  return ok ? "ok" : "**miss**";
};
const lines = [
  "| scenario | p50 1 conn single / cluster ms (≤ +2) | db ms/req 1 conn single / cluster | ratio 1 / 32 conns (≥ " +
    "0.5 reads, 0.4 writes) |" +
    (before ? " before: p50 cluster, db ms, ratios |" : ""),
  `|---|---|---|---|${before ? "---|" : ""}`,
];
for (const p of after.pairs) {
  const s1 = run(p, "single", 1);
  const c1 = run(p, "cluster", 1);
  const s32 = run(p, "single", 32);
  const c32 = run(p, "cluster", 32);
  const floor = p.write ? 0.4 : 0.5;
  const r1 = c1.rps / s1.rps;
  const r32 = c32 && s32 ? c32.rps / s32.rps : undefined;
  const p50ok = check(c1.p50 <= s1.p50 + 2);
  const r1ok = check(r1 >= floor);
  const r32ok = r32 === undefined ? "" : check(r32 >= floor);
  let prior = "";
  if (before) {
    const b = before.pairs.find((x) => x.name === p.name);
    if (b) {
      const bs1 = run(b, "single", 1),
        bc1 = run(b, "cluster", 1),
        bs32 = run(b, "single", 32),
        bc32 = run(b, "cluster", 32);
      prior =
        ` ${f1(bc1.p50)} ms, ${f2(bc1.dbCpuMsPerReq)}, ${f2(bc1.rps / bs1.rps)} / ` +
        `${bc32 && bs32 ? f2(bc32.rps / bs32.rps) : "–"} |`;
    } else prior = " – |";
  }
  lines.push(
    `| ${p.title} | ${f1(s1.p50)} / ${f1(c1.p50)} ${p50ok} | ${f2(s1.dbCpuMsPerReq)} / ${f2(c1.dbCpuMsPerReq)} ` +
      `| ${f2(r1)} ${r1ok} / ${f2(r32)} ${r32ok} |${prior}`,
  );
}
lines.push(
  "",
  `| list | cluster db ms/req smallest → largest | growth (≤ 1.5×) |${before ? " before |" : ""}`,
  `|---|---|---|${before ? "---|" : ""}`,
);
for (const g of after.growth) {
  const sizes = Object.keys(g.bySize);
  const lo = g.bySize[sizes[0]].cluster.dbCpuMsPerReq;
  const hi = g.bySize[sizes.at(-1)].cluster.dbCpuMsPerReq;
  let prior = "";
  if (before) {
    const b = before.growth.find((x) => x.name === g.name);
    const bs = b ? Object.keys(b.bySize) : [];
    prior = b ? ` ${f2(b.bySize[bs.at(-1)].cluster.dbCpuMsPerReq / b.bySize[bs[0]].cluster.dbCpuMsPerReq)}× |` : " – |";
  }
  lines.push(`| ${g.title} | ${f2(lo)} → ${f2(hi)} | ${f2(hi / lo)}× ${check(hi / lo <= 1.5)} |${prior}`);
}
process.stdout.write(`${lines.join("\n")}\n\n${met} of ${all} targets met.\n`);
