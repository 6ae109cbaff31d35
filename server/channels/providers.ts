// Placeholder until the conversations issue adds the provider adapters: every send fails.
import type { Logger } from "../logger.js";
import type { Providers } from "./index.js";

export function createProviders(_opts: { timeoutMs: number; logger: Logger }): Providers {
  return {
    async send() {
      return { ok: false, reason: "no provider adapters yet" };
    },
  };
}
