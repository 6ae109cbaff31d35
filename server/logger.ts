import { pino } from "pino";

// Never log a raw API key, a key hash or provider credentials: the request serializer keeps only
// method, url and the request id; redact covers headers that might slip in.
export function createLogger(level: string) {
  return pino({
    level,
    redact: { paths: ["req.headers['x-api-key']", "req.headers.authorization", "headers['x-api-key']", "config.accessToken", "config.token"], censor: "[redacted]" },
  });
}
export type Logger = ReturnType<typeof createLogger>;
