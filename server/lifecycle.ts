// Graceful shutdown's one flag and what follows from it for responses: once the process is stopping,
// every response that has not written its headers yet says "Connection: close", so that keep-alive
// clients reconnect elsewhere after it — requests that arrive from then on and those in progress alike.
// It is checked where a response writes its headers (ServerResponse#writeHead, which res.end() also
// goes through), on node's responses (ClosingResponse, server/main.ts) and on Express's (server/app.ts),
// so no collection of the responses in progress is needed. A Set that every request was added to and
// deleted from kept each request's objects alive through V8's young-generation collections (docs/
// decisions/performance.md, "No per-request object kept by a long-lived one").
import { ServerResponse } from "node:http";

let stopping = false;

export function isStopping(): boolean {
  return stopping;
}

export function startStopping(): void {
  stopping = true;
}

const nodeWriteHead = ServerResponse.prototype.writeHead as (
  this: ServerResponse,
  ...args: unknown[]
) => ServerResponse;

/** ServerResponse#writeHead, with "Connection: close" once the process is stopping. */
export function writeHeadClosing(this: ServerResponse, ...args: unknown[]): ServerResponse {
  if (stopping && !this.headersSent) this.setHeader("Connection", "close");
  return nodeWriteHead.apply(this, args);
}

/** The server's response class (http.createServer's ServerResponse option). */
export class ClosingResponse extends ServerResponse {}
(ClosingResponse.prototype as { writeHead: unknown }).writeHead = writeHeadClosing;
