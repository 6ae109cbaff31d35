// Channel: the tenant's messaging channels as the public API shows them (GET /channels) — what a
// conversation's `channelId` and POST /conversations/start's `channelId` name. The provider settings
// ("config": tokens, numbers) are never part of it. Also the one rule of which kinds have the 24-hour
// session window (POST /conversations/{id}/messages applies it).
import { z } from "zod";
import { CHANNEL_KINDS } from "./conversation.js";
import { col, defineRow, type RowOf } from "./row.js";

export type ChannelKind = (typeof CHANNEL_KINDS)[number];

/** The kinds whose free-text messages need the contact's 24-hour session window open (the messaging app's rule). */
export const SESSION_WINDOW_KINDS: readonly ChannelKind[] = ["whatsapp"];
export const hasSessionWindow = (kind: string): boolean => (SESSION_WINDOW_KINDS as readonly string[]).includes(kind);

export const ChannelObject = z
  .object({
    id: z.string(),
    kind: z.enum(CHANNEL_KINDS).meta({ description: "The channel kind (a conversation's `channel`)" }),
    name: z.string(),
    connected: z.boolean().meta({
      description: "Connected to its provider; POST /conversations/start needs a connected WhatsApp channel",
    }),
    sessionWindow: z.boolean().meta({
      description:
        "A free-text message (POST /conversations/{id}/messages) needs the contact's 24-hour session window open " +
        "(else 409 MESSAGING_SESSION_WINDOW_CLOSED); outside it, start with an approved template (GET /templates)",
    }),
  })
  .meta({ id: "Channel" });
export type ChannelObject = z.infer<typeof ChannelObject>;

export const Channel = defineRow("Channel", {
  id: col.uuid(),
  /** The "ChannelKind" domain. */
  kind: col.enum(CHANNEL_KINDS),
  name: col.text(),
  connected: col.bool(),
});
export type ChannelRow = RowOf<typeof Channel>;

/** A channel row (or Prisma's Channel, its config ignored) → the public channel. */
export const toChannel = Channel.toPublic(ChannelObject, {
  composed: { sessionWindow: (r) => hasSessionWindow(r.kind) },
});
