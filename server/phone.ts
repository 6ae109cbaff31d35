// Phone numbers → E.164 with libphonenumber-js (region from an explicit country, else the tenant's
// default country), in one place for every phone input (contacts, conversation starts, lead
// matching, the fixture loader). A number is accepted when libphonenumber-js calls it *possible*
// for its region AND it fits E.164 (at most 15 digits): the library calls some 16–19 digit numbers
// possible, which the database's CHECK on Contact.phone (^\+[1-9][0-9]{1,14}$) would then refuse.
import { parsePhoneNumberFromString, type CountryCode } from "libphonenumber-js/max";
import { validation } from "./errors.js";

/** E.164: a country code and subscriber number of at most 15 digits in all. */
export const E164_MAX_DIGITS = 15;
const E164 = /^\+[1-9]\d{1,14}$/;

export type PhoneResult = { ok: true; e164: string } | { ok: false; problem: string };

export function parsePhone(raw: string, country?: string | null): PhoneResult {
  const text = raw.trim();
  if (!text) return { ok: false, problem: "empty" };
  if (text.length > 40) return { ok: false, problem: "longer than 40 characters" };
  const region = country ? (country.toUpperCase() as CountryCode) : undefined;
  let parsed: ReturnType<typeof parsePhoneNumberFromString>;
  try {
    parsed = parsePhoneNumberFromString(text, region ? { defaultCountry: region } : undefined);
  } catch {
    parsed = undefined;
  }
  // isPossible (right length for the region) rather than isValid: fictional test ranges such as
  // +1 555 01xx are real-world integration data and must not be refused (docs/decisions/api.md, "Phone numbers").
  if (!parsed?.isPossible()) return { ok: false, problem: "not a possible phone number for its region" };
  if (!E164.test(parsed.number)) return { ok: false, problem: `E.164 allows at most ${E164_MAX_DIGITS} digits` };
  return { ok: true, e164: parsed.number };
}

/** E.164 form, or null for anything that is not an acceptable number. */
export function toE164(raw: string, country?: string | null): string | null {
  const r = parsePhone(raw, country);
  return r.ok ? r.e164 : null;
}

/** E.164 form of a phone input, or 422 VALIDATION_ERROR naming `field` (before anything reaches the database). */
export function requirePhone(raw: string, country: string | null | undefined, field: string): string {
  const r = parsePhone(raw, country);
  if (r.ok) return r.e164;
  throw validation(`${field} is not a valid phone number: ${r.problem}`, {
    fields: [{ field, code: "invalid_phone", message: r.problem }],
  });
}

/** Lenient form used for matching (e.g. a lead's customerPhone against contacts): E.164 when parseable. */
export function phoneForMatching(raw: string | null | undefined, country?: string | null): string | null {
  if (!raw) return null;
  const compact = raw.replace(/[\s().-]/g, "");
  return toE164(raw, country) ?? (E164.test(compact) ? compact : null);
}
