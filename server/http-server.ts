// The HTTP server's own limits, for the service (server/main.ts) and the tests' servers alike: how
// long a request line and its headers may be, and the envelope of a request over it. Node answers
// such a request before any application code runs, by default with a bare 431; here it gets the
// error envelope every other refusal has.
import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { Duplex } from "node:stream";
import { EXTERNAL_ID_MAX } from "../model/sync.js";
import { ERROR_STATUS, type Envelope } from "./errors.js";
import { API_CACHE_HEADERS } from "./http.js";

/** The most values a list's `id` or `externalId` parameters may name (routers/_lib/list.ts). */
export const MAX_LISTED_IDS = 100;

/**
 * The longest request line plus headers (Node's default: 16 KiB). A list naming its 100 external ids
 * of 255 characters each, every character 4 bytes of UTF-8 percent-encoded (12 bytes), must fit with
 * room for the usual headers: 100 × (12 + 255 × 12) + 16 KiB ≈ 315 KiB.
 */
export const MAX_HEADER_BYTES = 320 * 1024;
const worstList = MAX_LISTED_IDS * ("&externalId=".length + EXTERNAL_ID_MAX * 12) + 16 * 1024;
if (worstList > MAX_HEADER_BYTES) throw new Error(`MAX_HEADER_BYTES is below a list of ${MAX_LISTED_IDS} ids`);

/** Options of http.createServer. */
export const HTTP_SERVER_OPTIONS = { maxHeaderSize: MAX_HEADER_BYTES };

/** The raw response to a request refused before it reached the application. */
function raw(status: number, reason: string, body?: Envelope): string {
  const text = body ? JSON.stringify(body) : "";
  const head = [
    `HTTP/1.1 ${status} ${reason}`,
    "Connection: close",
    ...(body
      ? [
          "Content-Type: application/json; charset=utf-8",
          ...Object.entries(API_CACHE_HEADERS).map(([name, value]) => `${name}: ${value}`),
          `X-Request-Id: ${body.request_id}`,
        ]
      : []),
    `Content-Length: ${Buffer.byteLength(text)}`,
  ];
  return `${head.join("\r\n")}\r\n\r\n${text}`;
}

/**
 * Answers the requests Node's parser refuses: a request line and headers over MAX_HEADER_BYTES with
 * 431 and the envelope (REQUEST_HEADERS_TOO_LARGE); anything else as Node would (400, or 408 for a
 * request that took too long), then closes the connection.
 */
export function answerClientErrors(server: Server): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    if (err.code === "HPE_HEADER_OVERFLOW") {
      const envelope: Envelope = {
        error: "REQUEST_HEADERS_TOO_LARGE",
        message: `The request line and headers exceed ${MAX_HEADER_BYTES} bytes`,
        request_id: randomUUID(),
        details: { limitBytes: MAX_HEADER_BYTES },
      };
      socket.end(raw(ERROR_STATUS.REQUEST_HEADERS_TOO_LARGE, "Request Header Fields Too Large", envelope));
      return;
    }
    socket.end(err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? raw(408, "Request Timeout") : raw(400, "Bad Request"));
  });
}
