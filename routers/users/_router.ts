import { router } from "../trpc.js";
import { listUsers } from "./list.js";

export const usersRouter = router({
  list: listUsers,
});
