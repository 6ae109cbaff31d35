// A Redis of the drill's own: `redis-server` as a child process on a free port, no persistence.
// stop() ends it (the outage); start() brings a fresh one back on the same port.
import { spawn, type ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { onFreePort, terminate } from "./proc.js";
import { sleep, type Scope } from "./scope.js";

export interface OwnRedis {
  port: number;
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

/** One PING over a fresh connection: true when +PONG comes back. */
export function redisPing(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.on("error", () => done(false));
    s.on("connect", () => s.write("PING\r\n"));
    s.on("data", (d) => done(d.toString().startsWith("+PONG")));
  });
}

export async function startRedis(scope: Scope): Promise<OwnRedis> {
  // On another port when the one picked was taken before redis-server bound it.
  return onFreePort((port) => startOn(scope, port));
}

async function startOn(scope: Scope, port: number): Promise<OwnRedis> {
  let child: ChildProcess | undefined;
  const self: OwnRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      child = spawn(
        "redis-server",
        ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"],
        {
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      // Its last words, for a start that fails (a port taken meanwhile: "Address already in use").
      let said = "";
      const keep = (d: Buffer) => {
        said = (said + d.toString()).slice(-2000);
      };
      child.stdout?.on("data", keep);
      child.stderr?.on("data", keep);
      let failed: Error | undefined;
      child.on("error", (e) => (failed = e));
      for (let i = 0; i < 100; i++) {
        if (failed) throw new Error(`redis-server: ${failed.message}`);
        if (child.exitCode !== null) throw new Error(`redis-server :${port} exited ${child.exitCode}: ${said.trim()}`);
        if (await redisPing(port)) return;
        await sleep(50);
      }
      throw new Error(`redis-server on :${port} did not answer`);
    },
    async stop() {
      if (child) await terminate(child);
    },
  };
  scope.defer(`stop redis :${port}`, () => self.stop());
  await self.start();
  return self;
}
