// The drills' HTTP client: node:http with a keep-alive agent per target (so connection resets and
// refusals are visible as such), a client-side timeout, and a Tally that counts requests, 5xx and
// network errors. Every response is scanned for secrets and (error responses) stack traces.
import http from "node:http";
import { hasStackTrace, recordLeak, secretsIn } from "./observe.js";

export interface Res {
  status: number; // 0 when no HTTP answer arrived
  headers: http.IncomingHttpHeaders;
  text: string;
  body: any;
  ms: number;
  /** Network-level failure: ECONNREFUSED, ECONNRESET, "socket hang up", "client timeout" … */
  error?: string;
  reusedSocket?: boolean;
  startedAt: number;
}

export interface ReqOpts {
  key?: string | null;
  body?: unknown;
  raw?: string | Buffer;
  headers?: Record<string, string>;
  query?: Record<string, string | number | boolean | undefined>;
  timeoutMs?: number;
}

export class Tally {
  requests = 0;
  fiveXX = 0;
  netErrors = 0;
  readonly statuses = new Map<number, number>();
  count(res: Res) {
    this.requests += 1;
    if (res.status >= 500) this.fiveXX += 1;
    if (res.status === 0) this.netErrors += 1;
    this.statuses.set(res.status, (this.statuses.get(res.status) ?? 0) + 1);
  }
  describe(): string {
    return [...this.statuses]
      .sort((a, b) => a[0] - b[0])
      .map(([s, n]) => `${s || "net"}:${n}`)
      .join(" ");
  }
}

export function queryString(q?: ReqOpts["query"]): string {
  if (!q) return "";
  const entries = Object.entries(q).filter(([, v]) => v !== undefined) as [string, string | number | boolean][];
  return entries.length
    ? `?${new URLSearchParams(entries.map(([k, v]): [string, string] => [k, String(v)])).toString()}`
    : "";
}

export class Client {
  readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(
    readonly base: string,
    readonly tally: Tally,
    opts: { keepAlive?: boolean; maxSockets?: number } = {},
  ) {
    const u = new URL(base);
    this.host = u.hostname;
    this.port = Number(u.port);
    // Idle sockets are dropped after 4 s, before the server's 5 s keep-alive timeout (the usual client
    // practice: otherwise a request can race the server closing an idle socket).
    this.agent = new http.Agent({
      keepAlive: opts.keepAlive ?? true,
      maxSockets: opts.maxSockets ?? 32,
      timeout: 4000,
    });
  }

  request(method: string, path: string, o: ReqOpts = {}): Promise<Res> {
    const headers: Record<string, string | number> = { ...(o.key ? { "X-API-Key": o.key } : {}) };
    let payload: Buffer | undefined;
    if (o.body !== undefined) {
      payload = Buffer.from(JSON.stringify(o.body));
      headers["Content-Type"] = "application/json";
    } else if (o.raw !== undefined) payload = Buffer.isBuffer(o.raw) ? o.raw : Buffer.from(o.raw);
    Object.assign(headers, o.headers);
    if (payload) headers["Content-Length"] = payload.length;
    const startedAt = Date.now();
    const t0 = performance.now();
    return new Promise<Res>((resolve) => {
      let settled = false;
      const finish = (r: Omit<Res, "ms" | "startedAt">) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const res: Res = { ...r, ms: performance.now() - t0, startedAt };
        this.tally.count(res);
        inspect(method, path, res);
        resolve(res);
      };
      let req: http.ClientRequest;
      try {
        req = http.request({
          host: this.host,
          port: this.port,
          method,
          path: path + queryString(o.query),
          headers,
          agent: this.agent,
        });
      } catch (e) {
        // Invalid header value or path: the request never left (the drills' own generator's fault).
        finish({
          status: 0,
          headers: {},
          text: "",
          body: undefined,
          error: `client refused: ${(e as any).code ?? (e as Error).message}`,
        });
        return;
      }
      const timer = setTimeout(() => {
        req.destroy(new Error("client timeout"));
      }, o.timeoutMs ?? 20_000);
      req.on("error", (e: any) =>
        finish({
          status: 0,
          headers: {},
          text: "",
          body: undefined,
          error: e.code ?? e.message,
          reusedSocket: req.reusedSocket,
        }),
      );
      req.on("response", (resp) => {
        const chunks: Buffer[] = [];
        resp.on("data", (c: Buffer) => chunks.push(c));
        resp.on("error", (e: any) =>
          finish({
            status: 0,
            headers: {},
            text: "",
            body: undefined,
            error: `response ${e.code ?? e.message}`,
            reusedSocket: req.reusedSocket,
          }),
        );
        resp.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let body: any;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            body = undefined;
          }
          finish({ status: resp.statusCode ?? 0, headers: resp.headers, text, body, reusedSocket: req.reusedSocket });
        });
      });
      req.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function inspect(method: string, path: string, res: Res): void {
  if (res.status === 0) return;
  const where = `${method} ${path.split("?")[0]} → ${res.status}`;
  const all = `${res.text}\n${JSON.stringify(res.headers)}`;
  for (const label of secretsIn(all)) recordLeak(where, `${label} in the response`);
  if (res.status >= 400 && hasStackTrace(res.text)) recordLeak(where, "stack trace in an error response");
}

const ENVELOPE_KEYS = "details,error,message,request_id";

/** Problems with an error response's envelope (empty when it is the exact envelope). */
export function envelopeProblems(res: Res, expect?: { status?: number; error?: string }): string[] {
  const p: string[] = [];
  if (expect?.status !== undefined && res.status !== expect.status) p.push(`status ${res.status} != ${expect.status}`);
  const b = res.body;
  if (!b || typeof b !== "object" || Array.isArray(b))
    return [...p, `body is not a JSON object: ${res.text.slice(0, 120)}`];
  const keys = Object.keys(b).sort().join(",");
  if (keys !== ENVELOPE_KEYS) p.push(`envelope keys ${keys}`);
  if (typeof b.error !== "string" || !/^[A-Z_]+$/.test(b.error)) p.push(`error ${JSON.stringify(b.error)}`);
  if (expect?.error !== undefined && b.error !== expect.error) p.push(`error ${b.error} != ${expect.error}`);
  if (typeof b.message !== "string" || !b.message) p.push("message is not a non-empty string");
  if (typeof b.request_id !== "string" || !b.request_id || b.request_id !== res.headers["x-request-id"])
    p.push("request_id missing or != X-Request-Id");
  if (!b.details || typeof b.details !== "object" || Array.isArray(b.details)) p.push("details is not an object");
  if (!String(res.headers["content-type"] ?? "").startsWith("application/json"))
    p.push(`content-type ${res.headers["content-type"]}`);
  return p;
}

/** Percentile (0–100) of a list of numbers. */
export function percentile(values: number[], p: number): number {
  if (!values.length) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/** Runs `worker(i)` for i in [0, n) with at most `concurrency` at a time. */
export async function pool<T>(n: number, concurrency: number, worker: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await worker(i);
      }
    }),
  );
  return out;
}
