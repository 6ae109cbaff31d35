// Passwords of the configured URLs never reach an output: a start-up error line, the migrator's or the
// admin CLI's, a log line at any level, a stack. Two mechanisms, one rule for what a password is:
//   maskUrl(value)     a URL to show (a configuration error quoting it): its password as "***",
//                      whatever characters it holds; a value that does not parse as a URL and could
//                      hold credentials (it has an "@") is masked whole
//   maskSecrets(text)  any text (a driver's message, an inspected error, a log line): every password
//                      of DATABASE_URL, DIRECT_DATABASE_URL and REDIS_URL replaced by "***", in every
//                      form it may take there (as written, percent-decoded, JSON-escaped)
// The password of a URL is what lies between the first ":" after "scheme://" and the last "@": the
// parser's idea (WHATWG URL) differs for passwords with "/", "?", "#" or "@", which it reads as the
// end of the authority (docs/decisions/operations.md, "No password in any output"). The value of a
// `password` or `sslpassword` query parameter (libpq reads both; ioredis takes `password` as an
// option) is a password too.

const SCHEME = /^([a-z][a-z0-9+.-]*:\/\/)/i;

/** The userinfo password of a URL-like value, as written (undefined: none). */
function rawPassword(value: string): string | undefined {
  const scheme = SCHEME.exec(value);
  if (!scheme) return undefined;
  const rest = value.slice(scheme[1]!.length);
  const at = rest.lastIndexOf("@");
  if (at < 0) return undefined;
  const colon = rest.indexOf(":");
  if (colon < 0 || colon > at) return undefined;
  return rest.slice(colon + 1, at) || undefined;
}

/** A password query parameter: its name with "=" (group 1) and its value as written (group 2). */
const QUERY_PASSWORD = /([?&](?:ssl)?password=)([^&#]*)/gi;

/** The values of the password query parameters of a URL-like value, as written (empty ones left out). */
const queryPasswords = (value: string): string[] =>
  [...value.matchAll(QUERY_PASSWORD)].map((m) => m[2]!).filter(Boolean);

/** decodeURIComponent that never throws (a malformed "%" keeps the text as it is). */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Every form the password of `url` may take in a text, longest first (empty: no password). */
export function passwordForms(url: string): string[] {
  const forms = new Set<string>();
  const raw = rawPassword(url);
  let parsed: string | undefined;
  try {
    parsed = new URL(url).password || undefined;
  } catch {
    parsed = undefined;
  }
  // A query's value decoded as a form's too ("+" a space), as URLSearchParams reads it.
  const inQuery = queryPasswords(url).flatMap((p) => [p, p.replace(/\+/g, " ")]);
  for (const p of [raw, parsed, ...inQuery]) {
    if (!p) continue;
    for (const f of [p, decoded(p)]) {
      forms.add(f);
      forms.add(JSON.stringify(f).slice(1, -1)); // as a JSON string holds it (a log line)
    }
  }
  return [...forms].filter((f) => f.length > 0).sort((a, b) => b.length - a.length);
}

/**
 * `value` to show: its password as "***" (the userinfo's, and the value of a password query
 * parameter); a value that does not parse as a URL but may hold credentials, masked whole.
 */
export function maskUrl(value: string): string {
  const raw = rawPassword(value);
  const scheme = SCHEME.exec(value)?.[1];
  if (raw !== undefined) {
    const colon = value.indexOf(":", scheme!.length);
    return maskQueryPasswords(`${value.slice(0, colon + 1)}***${value.slice(colon + 1 + raw.length)}`);
  }
  let parses = true;
  try {
    new URL(value);
  } catch {
    parses = false;
  }
  return !parses && value.includes("@") ? `${scheme ?? ""}***` : maskQueryPasswords(value);
}

/** `value` with the value of every password query parameter as "***". */
const maskQueryPasswords = (value: string) =>
  value.replace(QUERY_PASSWORD, (_, name: string, v: string) => (v ? `${name}***` : name));

const CONFIGURED = ["DATABASE_URL", "DIRECT_DATABASE_URL", "REDIS_URL"] as const;
let cached: { key: string; forms: string[] } | undefined;

/** The password forms of the URLs configured in `env` (cached while they stay the same). */
function configuredForms(env: NodeJS.ProcessEnv): string[] {
  const key = CONFIGURED.map((k) => env[k] ?? "").join("\n");
  if (cached?.key !== key)
    cached = {
      key,
      forms: [...new Set(CONFIGURED.flatMap((k) => (env[k] ? passwordForms(env[k]!) : [])))].sort(
        (a, b) => b.length - a.length,
      ),
    };
  return cached.forms;
}

/**
 * `text` with every configured password replaced by "***" (and those of `urls`: a configuration read from elsewhere).
 */
export function maskSecrets(
  text: string,
  env: NodeJS.ProcessEnv = process.env,
  urls: (string | undefined)[] = [],
): string {
  const forms = [...configuredForms(env), ...urls.flatMap((u) => (u ? passwordForms(u) : []))].sort(
    (a, b) => b.length - a.length,
  );
  let out = text;
  for (const f of forms) if (out.includes(f)) out = out.split(f).join("***");
  return out;
}
