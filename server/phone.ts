// Phone numbers → E.164 with libphonenumber-js (region from an explicit country, else the tenant's
// default country). Returns null for anything that is not a valid number.
import { parsePhoneNumberFromString, type CountryCode } from "libphonenumber-js/max";

export function toE164(raw: string, country?: string | null): string | null {
  const text = raw.trim();
  if (!text || text.length > 40) return null;
  const region = country ? (country.toUpperCase() as CountryCode) : undefined;
  try {
    const parsed = parsePhoneNumberFromString(text, region ? { defaultCountry: region } : undefined);
    // isPossible (right length for the region) rather than isValid: fictional test ranges such as
    // +1 555 01xx are real-world integration data and must not be refused (docs/decisions.md).
    if (!parsed || !parsed.isPossible()) return null;
    return parsed.number;
  } catch {
    return null;
  }
}

/** Lenient form used for matching (e.g. a lead's customerPhone against contacts): E.164 when parseable. */
export function phoneForMatching(raw: string | null | undefined, country?: string | null): string | null {
  if (!raw) return null;
  return toE164(raw, country) ?? (/^\+[1-9]\d{1,14}$/.test(raw.replace(/[\s().-]/g, "")) ? raw.replace(/[\s().-]/g, "") : null);
}
