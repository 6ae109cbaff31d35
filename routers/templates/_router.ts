import { router } from "../trpc.js";
import { listTemplates } from "./list.js";

export const templatesRouter = router({
  list: listTemplates,
});
