// GET /public/v1/users — the tenant's users (any read scope): what `assignedOperatorId`,
// `assignedUserId`, `assignedTo`, `createdBy` and `authorUserId` name, with whether each can be booked
// and assigned. A key that can read any resource sees the people its objects name, so any one read
// scope admits it (scopedAny, as GET /changes). By name (code point order), then id. An offset list as
// every list (routers/_lib/reference.ts).
import { z } from "zod";
import { RESOURCES } from "../../model/resources.js";
import { toUser, User, UserObject, type UserRow } from "../../model/user.js";
import type { Scope } from "../../server/auth/scopes.js";
import { OFFSET_BUDGET_DOC, userSize } from "../_lib/page-budget.js";
import { referenceList } from "../_lib/reference.js";
import { OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { scopedAny } from "../trpc.js";

/** Every resource's read scope: any one of them admits the list. */
export const READ_SCOPES = RESOURCES.map((r): Scope => `tenant:${r}.read`);

export const ListUsersInput = z.object({ ...PageQuery });

const userList = referenceList<UserRow, UserObject>({
  table: "User",
  select: User.select("r"),
  order: [{ column: "name", text: true }],
  size: userSize(),
  toPublic: toUser,
});

export const listUsers = scopedAny(READ_SCOPES)
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/users",
      tags: ["users"],
      summary: "List users",
      description:
        "The tenant's users: the people `assignedOperatorId`, `assignedUserId`, `assignedTo`, `createdBy` and " +
        "`authorUserId` name, with whether appointments can be booked with them (`bookable`) and tickets assigned to " +
        "them (`assignable`). By `name` (compared by Unicode code point), then `id`, ascending. Any read scope " +
        "(`tenant:<resource>.read`) admits it. `limit` 1 to 200 (default 50), `offset` default 0. " +
        OFFSET_BUDGET_DOC,
      protect: true,
    },
  })
  .input(ListUsersInput)
  .output(OffsetList(UserObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    const { total, items } = await userList.read(ctx, { filters: [], ...page });
    return offsetList(items, total, page);
  });
