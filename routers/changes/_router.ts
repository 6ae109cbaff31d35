import { router } from "../trpc.js";
import { listChanges } from "./list.js";
import { subscribeChanges } from "./subscribe.js";

export const changesRouter = router({
  list: listChanges,
  subscribe: subscribeChanges,
});
