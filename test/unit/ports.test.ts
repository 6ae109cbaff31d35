// Ports picked for test servers (drills/lib/proc.ts onFreePort, used by the drills' PostgreSQL, Redis,
// Redis Cluster, PgBouncer and service starts, and by the process tests through
// test/helpers/processes.ts): freePort() closes its probe before the server binds the port, so another
// process can take it in between; the start is then made again on another port, and only then.
import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { onFreePort, portTaken } from "../../drills/lib/proc.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});
const listen = (port: number) =>
  new Promise<Server>((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(port, "127.0.0.1", () => {
      servers.push(s);
      resolve(s);
    });
  });

describe("onFreePort", () => {
  it("a start whose port was taken meanwhile (EADDRINUSE) is made again on another port", async () => {
    const tried: number[] = [];
    const server = await onFreePort(async (port) => {
      tried.push(port);
      if (tried.length === 1) await listen(port); // another process binds it first
      return listen(port);
    });
    expect(tried).toHaveLength(2);
    expect(tried[1]).not.toBe(tried[0]);
    expect((server.address() as { port: number }).port).toBe(tried[1]);
  });

  it("any other failure is not retried; a port taken every time gives up after the attempts", async () => {
    let calls = 0;
    await expect(
      onFreePort(async () => {
        calls++;
        throw new Error("initdb: bad locale");
      }),
    ).rejects.toThrow("bad locale");
    expect(calls).toBe(1);
    calls = 0;
    await expect(
      onFreePort(async () => {
        calls++;
        throw new Error("listen EADDRINUSE");
      }, 3),
    ).rejects.toThrow("EADDRINUSE");
    expect(calls).toBe(3);
  });

  it("reads the servers' own words for a taken port", () => {
    for (const said of [
      "listen EADDRINUSE: address already in use 127.0.0.1:4100",
      'LOG:  could not bind IPv4 address "127.0.0.1": Address already in use',
      "Warning: Could not create server TCP listening socket 127.0.0.1:4100: bind: Address already in use",
      "WARNING cannot listen on 127.0.0.1:4100: bind(): Address already in use",
      "port 4100 is already in use (PORT)",
    ])
      expect(portTaken(said), said).toBe(true);
    for (const said of ["connect ECONNREFUSED 127.0.0.1:4100", "pg_ctl: could not start server", "database is in use"])
      expect(portTaken(said), said).toBe(false);
  });
});
