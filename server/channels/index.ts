// Outbound messaging: one adapter per channel kind behind one interface (providers.ts dispatches to
// whatsapp.ts, graph.ts for messenger/instagram, telegram.ts; web is in-service). messages.ts stores
// messages and records delivery outcomes for the API and the admin inbound-message verb.
export interface SendResult {
  ok: boolean;
  providerMessageId?: string;
  /** Why a send failed (never contains credentials). */
  reason?: string;
}

export interface OutboundText {
  kind: "text";
  text: string;
}
export interface OutboundTemplate {
  kind: "template";
  name: string;
  language: string;
  variables: string[];
}

export interface ChannelRef {
  kind: "web" | "whatsapp" | "messenger" | "instagram" | "telegram";
  config: unknown;
}

export interface Providers {
  send(channel: ChannelRef, to: string, message: OutboundText | OutboundTemplate): Promise<SendResult>;
}
