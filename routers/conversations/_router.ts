import { router } from "../trpc.js";
import { getConversation } from "./get.js";
import { listConversations } from "./list.js";
import { listMessages } from "./messages-list.js";
import { sendMessage } from "./messages-send.js";
import { startConversation } from "./start.js";

export const conversationsRouter = router({
  list: listConversations,
  get: getConversation,
  start: startConversation,
  messages: router({ list: listMessages, send: sendMessage }),
});
