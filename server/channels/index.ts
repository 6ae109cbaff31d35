// Outbound messaging: one adapter per channel kind behind one interface. Filled in by the
// conversations issue; the foundation only fixes the shape that Services carries.
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
