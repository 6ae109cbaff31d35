// Provider stand-ins on 127.0.0.1: one that accepts connections and never answers, one that resets
// every connection as soon as a request arrives, and one that answers like the real providers.
import { createServer as createHttpServer, type ServerResponse } from "node:http";
import { createServer, type Socket } from "node:net";
import type { Scope } from "./scope.js";

export interface StandIn {
  baseUrl: string;
  /** Requests (connections with data) seen. */
  hits: number;
  /** Raw request texts seen (for the secrets check: tokens travel to the provider, nowhere else). */
  received: string[];
}

async function listen(server: {
  listen: (port: number, host: string, cb: () => void) => unknown;
  address: () => unknown;
}): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as { port: number }).port;
}

/** Accepts the connection, reads the request, never answers. */
export async function hangingProvider(scope: Scope): Promise<StandIn> {
  const sockets = new Set<Socket>();
  const self: StandIn = { baseUrl: "", hits: 0, received: [] };
  const server = createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    s.once("data", () => (self.hits += 1));
  });
  self.baseUrl = `http://127.0.0.1:${await listen(server)}`;
  scope.defer("close hanging provider", async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return self;
}

/** Resets (RST) every connection as soon as a request arrives. */
export async function resettingProvider(scope: Scope): Promise<StandIn> {
  const self: StandIn = { baseUrl: "", hits: 0, received: [] };
  const server = createServer((s) => {
    s.on("error", () => {});
    s.once("data", () => {
      self.hits += 1;
      s.resetAndDestroy();
    });
  });
  self.baseUrl = `http://127.0.0.1:${await listen(server)}`;
  scope.defer("close resetting provider", () => new Promise<void>((r) => server.close(() => r())));
  return self;
}

/** Answers like WhatsApp/Graph/Telegram (a provider-shaped 200 with a message id), after delayMs. */
export async function okProvider(scope: Scope, delayMs = 0): Promise<StandIn> {
  const self: StandIn = { baseUrl: "", hits: 0, received: [] };
  const open = new Set<ServerResponse>();
  const server = createHttpServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      self.hits += 1;
      self.received.push(`${req.method} ${req.url} ${JSON.stringify(req.headers)} ${raw}`);
      const n = self.hits;
      const body = /\/sendMessage$/.test(req.url ?? "")
        ? { ok: true, result: { message_id: 9000 + n } }
        : /\/me\/messages/.test(req.url ?? "")
          ? { recipient_id: "x", message_id: `m_${n}` }
          : { messaging_product: "whatsapp", messages: [{ id: `wamid.drill${n}` }] };
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify(body));
      }, delayMs);
    });
    open.add(res);
    res.on("close", () => open.delete(res));
  });
  self.baseUrl = `http://127.0.0.1:${await listen(server)}`;
  scope.defer("close ok provider", async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return self;
}

/** Answers 401 with the whole request echoed back (URL, headers, body): a provider whose error body contains the credentials. */
export async function echoingProvider(scope: Scope): Promise<StandIn> {
  const self: StandIn = { baseUrl: "", hits: 0, received: [] };
  const server = createHttpServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      self.hits += 1;
      res.writeHead(401, { "Content-Type": "application/json", "X-Echo-Url": req.url ?? "" });
      res.end(JSON.stringify({ error: { message: `invalid token in ${req.url}`, headers: req.headers, body: raw } }));
    });
  });
  self.baseUrl = `http://127.0.0.1:${await listen(server)}`;
  scope.defer("close echoing provider", async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return self;
}
