// User: the tenant's people as the public API shows them (GET /users) — the ids that
// `assignedOperatorId`, `assignedUserId`, `assignedTo`, `createdBy` and `authorUserId` name. Their
// e-mail, API grant and working hours are not part of it.
import { z } from "zod";
import { col, defineRow, type RowOf } from "./row.js";

export const UserObject = z
  .object({
    id: z.string(),
    name: z.string(),
    bookable: z.boolean().meta({
      description: "Appointments can be booked with this user (GET /availability picks among the bookable users)",
    }),
    assignable: z.boolean().meta({ description: "Tickets can be assigned to this user (`assignedTo`)" }),
  })
  .meta({ id: "User" });
export type UserObject = z.infer<typeof UserObject>;

export const User = defineRow("User", {
  id: col.uuid(),
  name: col.text(),
  bookable: col.bool(),
  assignable: col.bool(),
});
export type UserRow = RowOf<typeof User>;

/** A user row (or Prisma's User, its other fields ignored) → the public user. */
export const toUser = User.toPublic(UserObject, { composed: {} });
