// What every drill feeds into the secrets check (drill 8): the secrets it created (raw API keys,
// their SHA-256 hashes, provider tokens) and every log line of every service process. Responses are
// scanned as they arrive (http.ts): a secret in any response, or a stack trace in an error response,
// is a leak counted against the drill that received it.
import { createHash } from "node:crypto";

export interface Leak {
  where: string;
  what: string;
}

const secrets = new Map<string, string>(); // value → label
const logs: { source: string; line: string }[] = [];
const leaks: Leak[] = [];

export function addSecret(value: string | undefined | null, label: string): void {
  if (value && value.length >= 6) secrets.set(value, label);
}

/** Registers a raw API key and the SHA-256 hash the database stores for it. */
export function addApiKey(raw: string, label: string): void {
  addSecret(raw, `raw API key ${label}`);
  addSecret(createHash("sha256").update(raw).digest("hex"), `key hash ${label}`);
}

export function allSecrets(): Map<string, string> {
  return secrets;
}

export function addLogLine(source: string, line: string): void {
  logs.push({ source, line });
}

export function allLogs(): readonly { source: string; line: string }[] {
  return logs;
}

/** The labels of the secrets that occur in text. */
export function secretsIn(text: string): string[] {
  const found: string[] = [];
  for (const [value, label] of secrets) if (text.includes(value)) found.push(label);
  return found;
}

// A V8 stack frame ("    at fn (file:line:col)") or a source path with a line number.
const STACK_RE =
  /\n\s+at .+:\d+:\d+\)?|\bat (?:async )?[\w.$<>]+ \((?:file:|node:|\/)[^)]*:\d+:\d+\)|node_modules\/|\.ts:\d+:\d+/;

export function hasStackTrace(text: string): boolean {
  return STACK_RE.test(text);
}

export function recordLeak(where: string, what: string): void {
  leaks.push({ where, what });
}

export function leakCount(): number {
  return leaks.length;
}

export function leaksSince(n: number): Leak[] {
  return leaks.slice(n);
}
