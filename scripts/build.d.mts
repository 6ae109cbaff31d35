// Types of scripts/build.mjs (plain JavaScript so that npm ci's postinstall runs it without tsx).
export const ROOT: string;
export const DIST: string;
export const ENTRY: string;
export function staleReason(): string | undefined;
export function build(): Promise<{ ms: number; inputs: number }>;
