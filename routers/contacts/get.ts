// GET /public/v1/contacts/{contact_id} — one contact (scope tenant:contacts.read). Unknown, foreign
// or soft-deleted → 404. Sends its version as the ETag; If-None-Match naming it → 304 (rest/facade.ts).
import { z } from "zod";
import { ContactObject, toContact } from "../../model/contact.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";

export const GetContactInput = z.object({ contact_id: Id });

export const getContact = scoped("tenant:contacts.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "GET",
      path: "/public/v1/contacts/{contact_id}",
      tags: ["contacts"],
      summary: "Get one contact",
      description:
        "A live contact of the tenant; an unknown, foreign or deleted contact gives 404. " +
        "The `ETag` is the contact's version; `If-None-Match` naming it answers 304 without a body.",
      protect: true,
    },
  })
  .input(GetContactInput)
  .output(ContactObject)
  .query(async ({ ctx, input }) =>
    toContact(
      await mustExist(
        ctx.db.contact.findFirst({ where: owned(ctx, { id: input.contact_id, deletedAt: null }) }),
        "Contact",
      ),
    ),
  );
