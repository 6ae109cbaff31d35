// The benchmark's latency percentiles (bench/latency.ts): nearest rank over fractional milliseconds.
import { describe, expect, it } from "vitest";
import { percentiles } from "../../bench/latency.js";

describe("benchmark latency percentiles", () => {
  it("keep sub-millisecond values and take the nearest rank", () => {
    const samples = Array.from({ length: 1000 }, (_, i) => (i + 1) / 1000); // 0.001 … 1.000 ms, shuffled below
    for (let i = samples.length - 1; i > 0; i--) {
      const j = (i * 7919) % (i + 1);
      [samples[i], samples[j]] = [samples[j]!, samples[i]!];
    }
    expect(percentiles(samples)).toEqual({ p50: 0.5, p90: 0.9, p99: 0.99, max: 1 });
  });

  it("sort numerically, not as text", () => {
    expect(percentiles([10, 9, 100, 2]).max).toBe(100);
    expect(percentiles([10, 9, 100, 2]).p50).toBe(9);
  });

  it("are NaN without samples and the sample itself with one", () => {
    const none = percentiles([]);
    expect([none.p50, none.p90, none.p99, none.max].every(Number.isNaN)).toBe(true);
    expect(percentiles([0.37])).toEqual({ p50: 0.37, p90: 0.37, p99: 0.37, max: 0.37 });
  });
});
