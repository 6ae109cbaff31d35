// The request facts of an HTTP call, parsed once at the edge for both transports (the REST facade
// and /trpc): the headers an operation may read (Idempotency-Key, If-Match, If-None-Match), each
// validated here and, when malformed, kept as its 422 for the operation that reads it to raise; the
// input problem the body reader recorded; a /trpc batch's quota refusals. The procedures read these
// (routers/trpc.ts RequestFacts), never the request.
import type { IncomingMessage } from "node:http";
import { readIdempotencyKey } from "../server/idempotency.js";
import { AppError } from "../server/errors.js";
import { exchangeOf } from "../server/exchange.js";
import { headerOf } from "../server/http.js";
import type { RequestFacts } from "../routers/trpc.js";
import { parseIfMatch } from "../routers/_lib/sync.js";

export function factsOf(req: IncomingMessage, transport: "rest" | "trpc", shadowed?: readonly string[]): RequestFacts {
  const x = exchangeOf(req);
  const facts: RequestFacts = {
    transport,
    inputProblem: x.inputProblem,
    refusals: x.batch?.refusals,
    shadowed,
    quota: x.quota?.windows,
  };
  const key = req.headers["idempotency-key"];
  if (key !== undefined) {
    try {
      facts.idempotencyKey = readIdempotencyKey(key);
    } catch (err) {
      facts.problems = { idempotencyKey: err as AppError };
    }
  }
  const ifMatch = parseIfMatch(req.headers["if-match"]);
  if (ifMatch instanceof AppError) facts.problems = { ...facts.problems, ifMatch };
  else if (ifMatch) facts.ifMatch = ifMatch;
  facts.ifNoneMatch = headerOf(req, "if-none-match");
  return facts;
}
