// Graceful shutdown's "Connection: close" (server/lifecycle.ts): once the process is stopping, every
// response that has not written its headers says so — those in progress when the flag is set included —
// on node's responses (ClosingResponse) and on Express's (app.response.writeHead), with no collection
// of the responses in progress.
import { once } from "node:events";
import http, { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { afterAll, describe, expect, it } from "vitest";
import { ClosingResponse, isStopping, startStopping, writeHeadClosing } from "../../server/lifecycle.js";

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
const servers: Server[] = [];
afterAll(() => {
  agent.destroy();
  for (const s of servers) s.close();
});

async function listen(server: Server): Promise<string> {
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function get(url: string): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
      })
      .on("error", reject);
  });
}

describe("Connection: close once stopping", () => {
  it("node's responses and Express's: keep-alive before, close after — also for a response in progress when it began", async () => {
    // A node server whose handler holds each response until released (a request in progress).
    const held: (() => void)[] = [];
    const nodeUrl = await listen(
      createServer({ ServerResponse: ClosingResponse }, (req, res) => {
        const answer = () => res.end(JSON.stringify({ path: req.url }));
        if (req.url === "/hold") held.push(answer);
        else answer();
      }),
    );
    const app = express();
    (app.response as { writeHead: unknown }).writeHead = writeHeadClosing;
    app.get("/x", (_req, res) => {
      res.json({ ok: true });
    });
    const expressUrl = await listen(createServer(app));

    expect(isStopping()).toBe(false);
    const before = await get(`${nodeUrl}/now`);
    expect(before).toMatchObject({ status: 200, connection: "keep-alive", body: '{"path":"/now"}' });
    expect((await get(`${expressUrl}/x`)).connection).toBe("keep-alive");

    const inProgress = get(`${nodeUrl}/hold`);
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    startStopping();
    expect(isStopping()).toBe(true);
    held[0]!();
    expect(await inProgress).toMatchObject({ status: 200, connection: "close", body: '{"path":"/hold"}' });
    expect((await get(`${nodeUrl}/later`)).connection).toBe("close");
    const viaExpress = await get(`${expressUrl}/x`);
    expect(viaExpress).toMatchObject({ status: 200, connection: "close", body: '{"ok":true}' });
  });
});
