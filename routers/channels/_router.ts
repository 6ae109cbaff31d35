import { router } from "../trpc.js";
import { listChannels } from "./list.js";

export const channelsRouter = router({
  list: listChannels,
});
