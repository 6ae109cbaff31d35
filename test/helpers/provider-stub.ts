// A local stand-in for the messaging providers: a node:http server on 127.0.0.1:0 that records every
// request (method, path, query, headers, JSON body) and answers as programmed — by default a
// provider-shaped 200 with ids for WhatsApp, Graph and Telegram.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createNetServer } from "node:net";
import type { AddressInfo } from "node:net";

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  raw: string;
}

/** What the stub does with a request: answer (status + JSON body) or hang (never answer). */
export type StubBehaviour = { status: number; body?: unknown } | "hang";

export interface ProviderStub {
  baseUrl: string;
  requests: RecordedRequest[];
  /** Program the answer for the following requests (default: provider-shaped 200). */
  respond(b: StubBehaviour | ((r: RecordedRequest) => StubBehaviour)): void;
  reset(): void;
  close(): Promise<void>;
}

let counter = 0;

/** A provider-shaped success answer for the request's path. */
export function successFor(r: RecordedRequest): { status: number; body: unknown } {
  counter += 1;
  if (/\/sendMessage$/.test(r.path)) return { status: 200, body: { ok: true, result: { message_id: 7000 + counter } } };
  if (/\/me\/messages$/.test(r.path))
    return { status: 200, body: { recipient_id: r.body?.recipient?.id, message_id: `m_${counter}` } };
  return {
    status: 200,
    body: {
      messaging_product: "whatsapp",
      contacts: [{ input: r.body?.to, wa_id: r.body?.to }],
      messages: [{ id: `wamid.${counter}` }],
    },
  };
}

export async function startProviderStub(): Promise<ProviderStub> {
  const requests: RecordedRequest[] = [];
  let behaviour: StubBehaviour | ((r: RecordedRequest) => StubBehaviour) | undefined;
  const hanging = new Set<ServerResponse>();

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const url = new URL(req.url ?? "/", "http://stub");
      let body: any;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = raw;
      }
      const rec: RecordedRequest = {
        method: req.method ?? "",
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: req.headers,
        body,
        raw,
      };
      requests.push(rec);
      const b = typeof behaviour === "function" ? behaviour(rec) : (behaviour ?? successFor(rec));
      if (b === "hang") {
        hanging.add(res);
        res.on("close", () => hanging.delete(res));
        return;
      }
      res.writeHead(b.status, { "Content-Type": "application/json" });
      res.end(b.body === undefined ? "" : JSON.stringify(b.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    respond(b) {
      behaviour = b;
    },
    reset() {
      requests.length = 0;
      behaviour = undefined;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A base URL on which nothing listens (a port that was just bound and released): connection refused. */
export async function closedPortUrl(): Promise<string> {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}
