// Loaded with `node --import scripts/memory-probe.mjs` by scripts/memory.ts: when MEMORY_PROBE
// names a file, writes process.memoryUsage() (MiB) there every second, replacing it (the V8 heap
// and "external" — ArrayBuffers and WebAssembly memories — as the process sees them). Does nothing
// otherwise.
import { writeFileSync } from "node:fs";

const file = process.env.MEMORY_PROBE;
if (file) {
  setInterval(() => {
    const m = process.memoryUsage();
    writeFileSync(file, JSON.stringify(Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v / 1048576]))));
  }, 1000).unref();
}
