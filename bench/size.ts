/** A tenant size as written in BENCH_SIZES: "10k" → 10000, "1m" → 1000000, "2500" → 2500. */
export function parseSize(label: string): number {
  const m = /^(\d+(?:\.\d+)?)([km]?)$/i.exec(label.trim());
  if (!m) throw new Error(`BENCH_SIZES: "${label}" is not a size like 10k, 100k or 1m`);
  const unit = m[2]!.toLowerCase();
  return Math.round(Number(m[1]) * (unit === "m" ? 1e6 : unit === "k" ? 1e3 : 1));
}

/** 10000 → "10k", 1000000 → "1m". */
export const sizeLabel = (n: number) =>
  n >= 1e6 && n % 1e6 === 0 ? `${n / 1e6}m` : n >= 1e3 && n % 1e3 === 0 ? `${n / 1e3}k` : String(n);
