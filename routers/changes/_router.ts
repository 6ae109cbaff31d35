import { router } from "../trpc.js";
import { listChanges } from "./list.js";

export const changesRouter = router({
  list: listChanges,
});
