// Latency percentiles of a benchmark run, from each response's own time in fractional milliseconds.

/** p50/p90/p99/max of fractional-millisecond samples (nearest rank); NaN without samples. */
export function percentiles(samples: number[]): { p50: number; p90: number; p99: number; max: number } {
  const a = Float64Array.from(samples).sort();
  const at = (q: number) => (a.length ? a[Math.min(a.length - 1, Math.ceil(q * a.length) - 1)]! : NaN);
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: a.length ? a[a.length - 1]! : NaN };
}
