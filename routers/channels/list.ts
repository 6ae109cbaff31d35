// GET /public/v1/channels — the tenant's messaging channels (tenant:conversations.read): what a
// conversation's `channelId` and POST /conversations/start's `channelId` name, with the channel kind,
// whether it is connected and whether the 24-hour session window applies (model/channel.ts, the rule
// POST /conversations/{id}/messages applies). Never the provider settings. By name (code point
// order), then id. An offset list as every list (routers/_lib/reference.ts).
import { z } from "zod";
import { Channel, ChannelObject, toChannel, type ChannelRow } from "../../model/channel.js";
import { channelSize, OFFSET_BUDGET_DOC } from "../_lib/page-budget.js";
import { referenceList } from "../_lib/reference.js";
import { OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { scoped } from "../trpc.js";

export const ListChannelsInput = z.object({ ...PageQuery });

const channelList = referenceList<ChannelRow, ChannelObject>({
  table: "Channel",
  select: Channel.select("r"),
  order: [{ column: "name", text: true }],
  size: channelSize(),
  toPublic: toChannel,
});

export const listChannels = scoped("tenant:conversations.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/channels",
      tags: ["channels"],
      summary: "List channels",
      description:
        "The tenant's messaging channels: what a conversation's `channelId` names, and where " +
        "POST /conversations/start can send (a connected `whatsapp` channel). `sessionWindow` says whether a " +
        "free-text message needs the contact's 24-hour session window open. By `name` (compared by Unicode code " +
        `point), then \`id\`, ascending. \`limit\` 1 to 200 (default 50), \`offset\` default 0. ${OFFSET_BUDGET_DOC}`,
      protect: true,
    },
  })
  .input(ListChannelsInput)
  .output(OffsetList(ChannelObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    const { total, items } = await channelList.read(ctx, { filters: [], ...page });
    return offsetList(items, total, page);
  });
