// The real provider adapters behind the Providers interface (shared/contracts/operations.md
// "Messaging providers"): one small module per kind, dispatched on the channel kind. Failures are
// logged with the channel kind and a reason only — never a URL, header or config value.
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { sendGraph } from "./graph.js";
import type { ChannelRef, OutboundTemplate, OutboundText, Providers, SendResult } from "./index.js";
import { sendTelegram } from "./telegram.js";
import { sendWhatsapp } from "./whatsapp.js";

export function createProviders(opts: { timeoutMs: number; logger: Logger; metrics?: Metrics }): Providers {
  const { timeoutMs, logger, metrics } = opts;
  return {
    async send(channel: ChannelRef, to: string, message: OutboundText | OutboundTemplate): Promise<SendResult> {
      let result: SendResult;
      try {
        switch (channel.kind) {
          case "web":
            // The web chat is delivered inside the service: the operator inbox and the widget read
            // the stored message. Nothing to call, nothing that can lack credentials.
            result = { ok: true };
            break;
          case "whatsapp":
            result = await sendWhatsapp(channel.config, to, message, timeoutMs);
            break;
          case "messenger":
          case "instagram":
            result = await sendGraph(channel.config, to, message, timeoutMs);
            break;
          case "telegram":
            result = await sendTelegram(channel.config, to, message, timeoutMs);
            break;
          default:
            result = { ok: false, reason: "unknown channel kind" };
        }
      } catch {
        result = { ok: false, reason: "provider adapter error" };
      }
      metrics?.providerSends.inc({ channel: channel.kind, outcome: result.ok ? "sent" : "failed" });
      if (!result.ok)
        logger.warn(
          { channelKind: channel.kind, messageKind: message.kind, reason: result.reason },
          "outbound send failed",
        );
      return result;
    },
  };
}
