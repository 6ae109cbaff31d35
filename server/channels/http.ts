// The one outbound HTTP call every provider adapter makes: global fetch, JSON body, bounded by
// AbortSignal.timeout(providerTimeoutMs). The outcome is classified into a SendResult reason that
// never contains the URL (Graph puts the access token in the query, Telegram the bot token in the
// path) nor any header value.
import type { SendResult } from "./index.js";

export interface ProviderRequest {
  url: string;
  headers?: Record<string, string>;
  body: unknown;
  timeoutMs: number;
}

export interface ProviderAnswer {
  ok: true;
  status: number;
  json: unknown;
}

/** Posts the JSON body; returns the 2xx answer (body parsed, null when not JSON) or a failed SendResult. */
export async function postJson(req: ProviderRequest): Promise<ProviderAnswer | SendResult> {
  let res: Response;
  try {
    res = await fetch(req.url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json", ...req.headers },
      body: JSON.stringify(req.body),
      signal: AbortSignal.timeout(req.timeoutMs),
      redirect: "error",
    });
  } catch (err) {
    return { ok: false, reason: classify(err) };
  }
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    return { ok: false, reason: classify(err) };
  }
  if (res.status < 200 || res.status > 299) return { ok: false, reason: `provider answered HTTP ${res.status}` };
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { ok: true, status: res.status, json };
}

export const isAnswer = (r: ProviderAnswer | SendResult): r is ProviderAnswer => "status" in r;

function classify(err: unknown): string {
  const e = err as { name?: unknown; code?: unknown; cause?: { code?: unknown } | null } | null | undefined;
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return "provider timed out";
  const code: unknown = e?.cause?.code ?? e?.code;
  if (code === "ECONNREFUSED") return "connection refused";
  if (typeof code === "string" && /^[A-Z_]+$/.test(code)) return `network error ${code}`;
  return "network error";
}

/** Reads a string setting from a channel's config (anything else counts as absent). */
export function setting(config: unknown, key: string): string | undefined {
  if (!config || typeof config !== "object" || Array.isArray(config)) return undefined;
  const v = (config as Record<string, unknown>)[key];
  return typeof v === "string" && v.trim() !== "" ? v : undefined;
}

/** The configured baseUrl (without trailing slashes) or the provider's public default. */
export function baseUrl(config: unknown, fallback: string): string {
  return (setting(config, "baseUrl") ?? fallback).replace(/\/+$/, "");
}

/** A non-empty string at obj[path...], or undefined. Numbers are accepted and stringified. */
export function pick(obj: unknown, ...path: (string | number)[]): string | undefined {
  let cur: unknown = obj;
  for (const p of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string | number, unknown>)[p];
  }
  if (typeof cur === "string" && cur !== "") return cur;
  if (typeof cur === "number" && Number.isFinite(cur)) return String(cur);
  return undefined;
}
