// Types of test/legs.mjs (plain JavaScript: read by vitest.config.ts, the tests and scripts/ci-summary.mjs).
export type Group = "unit" | "process" | "db";
export type Topology = "pooler" | "redis" | "citus";
export interface Leg {
  groups: Group[];
  topologies: Topology[];
  /** ci-summary fails the leg when it skipped more tests than this. */
  maxSkipped: number;
  what: string;
}
export const GROUPS: readonly Group[];
export const TOPOLOGIES: readonly Topology[];
export const LEGS: Record<string, Leg>;
export function topologiesOf(text: string): string[];
