// API key format: "crm_<12 base62 chars prefix>_<40 base62 chars secret>". The prefix is stored in
// clear (it identifies the key in /me and in listings); only the SHA-256 of the whole key is stored.
import { createHash, randomInt, timingSafeEqual } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const KEY_RE = /^(crm_[0-9A-Za-z]{12})_([0-9A-Za-z]{40})$/;

const randomString = (n: number) => Array.from({ length: n }, () => ALPHABET[randomInt(ALPHABET.length)]).join("");

export const hashKey = (raw: string) => createHash("sha256").update(raw).digest("hex");

export function generateKey(): { key: string; prefix: string; hash: string } {
  const prefix = `crm_${randomString(12)}`;
  const key = `${prefix}_${randomString(40)}`;
  return { key, prefix, hash: hashKey(key) };
}

/** The prefix of a well-formed key, or null for anything that cannot be a key. */
export function keyPrefix(raw: string): string | null {
  const m = KEY_RE.exec(raw);
  return m ? m[1]! : null;
}

/** Constant-time comparison of two hex digests. */
export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && timingSafeEqual(x, y);
}
