import { router } from "../trpc.js";
import { listStages } from "./list.js";

export const stagesRouter = router({
  list: listStages,
});
