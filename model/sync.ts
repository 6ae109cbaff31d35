// The external id of leads, contacts and tickets (issue 39): the integrator's own id, as the API and
// the fixture loader accept it. The database's check constraint holds the same length and control
// character rule (migration 20261203000000_sync). "." and ".." are refused here only: as a path
// segment a URL parser resolves them (…/by-external-id/%2e%2e is …/leads), so PUT could never reach
// an object holding one.
import { z } from "zod";

export const EXTERNAL_ID_MAX = 255;
/** C0 controls, DEL and C1 controls (the database's check constraint refuses the same). */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export const ExternalId = z
  .string()
  .refine((s) => s.length > 0, { message: "must be at least 1 character" })
  .refine((s) => [...s].length <= EXTERNAL_ID_MAX, { message: `must be at most ${EXTERNAL_ID_MAX} characters` })
  .refine((s) => !CONTROL.test(s), { message: "must not contain control characters" })
  .refine((s) => s !== "." && s !== "..", {
    message: 'must not be "." or "..": a URL path cannot name them (PUT by external id)',
  })
  .meta({
    minLength: 1,
    maxLength: EXTERNAL_ID_MAX,
    description:
      'Your own id for this object: 1 to 255 characters without control characters, not "." or "..", ' +
      "unique per tenant within the resource",
    example: "crm-10042",
  });
