// The OpenAPI 3.1 document: trpc-to-openapi's generator over the procedures, then made exact —
// the X-API-Key scheme with per-operation scopes, real success statuses (an upsert's 200 and 201),
// Idempotency-Key on creates and upserts, If-Match / If-None-Match and ETag where the object has a
// version, rate-limit and request-id headers, and for each operation the error responses it can
// really give with the envelope schema and their codes (replacing the generator's tRPC error shapes);
// the tags declared with descriptions, contact and license (so Spectral's spectral:oas and Redocly's
// recommended rules pass: `npm run lint:openapi`); optional query parameters as the REST adapter
// reads them (an empty value counts as absent); and the examples of rest/examples.ts — a request
// example on every operation, an error example for every code of every error status.
import type { AnyProcedure } from "@trpc/server";
import { generateOpenApiDocument, type OpenAPIObject } from "trpc-to-openapi";
import { ERROR_STATUS, type ErrorCode } from "../server/errors.js";
import { API_CACHE_HEADERS } from "../server/http.js";
import { ERROR_EXAMPLES, EXAMPLE_REQUEST_ID, OPERATION_EXAMPLES, type ErrorExample } from "./examples.js";
import type { AppRouter } from "../routers/index.js";
import type { Meta } from "../routers/trpc.js";

const DESCRIPTION = `Public REST API of the multi-tenant CRM: leads, contacts, conversations and messages,
appointments and availability, tickets, and caller introspection.

Every request carries \`X-API-Key\`. Errors always have the body \`{error, message, request_id, details}\`;
program against \`error\` only. Every response carries \`X-RateLimit-Limit\`, \`X-RateLimit-Remaining\`,
\`X-RateLimit-Reset\` and \`X-Request-Id\` (but a 431, answered before the key is read, which has no quota
state to tell); a 429 also carries \`Retry-After\`. Every answer is the key's own:
\`Cache-Control: ${API_CACHE_HEADERS["Cache-Control"]}\` (no shared cache keeps it; a client's cache revalidates
it, with \`If-None-Match\` where there is an \`ETag\`), \`Vary: ${API_CACHE_HEADERS.Vary}\` and
\`X-Content-Type-Options: ${API_CACHE_HEADERS["X-Content-Type-Options"]}\`.

Leads, contacts, tickets and appointments carry a \`version\`, sent as \`ETag\` with every answer
that is one of them: send it back in \`If-Match\` to write only while nobody else has changed the
object (else 412 \`PRECONDITION_FAILED\`), or in \`If-None-Match\` to read it only when it changed
(else 304 without a body). Leads, contacts and tickets can also carry your own id, \`externalId\`:
\`PUT …/by-external-id/{externalId}\` creates or updates by it, \`POST …/batch/upsert\` up to 100 at once.

The examples name the objects of the demo tenant that the first \`npm start\` on an empty embedded
database loads: on that service, Authorize with the key it printed (a new one:
\`npm run --silent admin -- demo-key\`) and "Try it out" succeeds as filled in (each create once: a
second try of \`POST /public/v1/contacts\` is the documented 409, its phone being taken; the upserts
by external id succeed every time, answering 200).`;

/** The operations' tags, in the order the reference shows them, each with its description. */
export const TAGS: { name: string; description: string }[] = [
  { name: "me", description: "Caller introspection: the key's tenant, owner, effective scopes and rate limits." },
  {
    name: "leads",
    description: "Sales leads: people interested in a property, moving through the tenant's pipeline stages.",
  },
  {
    name: "contacts",
    description: "The tenant's address book: one contact per phone number, in contact lists, with marketing consent.",
  },
  {
    name: "conversations",
    description:
      "Conversations with customers on the tenant's channels (WhatsApp, website chat, …) and their messages; outbound WhatsApp conversations start from an approved template.",
  },
  {
    name: "appointments",
    description:
      "Appointments of the tenant's users with customers (viewings, calls, …); a user's scheduled appointments never overlap.",
  },
  {
    name: "availability",
    description: "Free slots of the bookable users, from their working hours and scheduled appointments.",
  },
  {
    name: "tickets",
    description: "Support tickets about a contact, lead or conversation, with their comment threads.",
  },
  {
    name: "changes",
    description:
      "The changes feed: every create and update of the key's readable objects, in order, for incremental sync.",
  },
  {
    name: "stages",
    description: "The tenant's pipeline stages, in pipeline order: the names of the ids in a lead's `stageId`.",
  },
  {
    name: "users",
    description:
      "The tenant's users: who an assignment, an appointment, a ticket or a comment names; bookable, assignable.",
  },
  {
    name: "channels",
    description:
      "The tenant's messaging channels: their kind, whether connected, and whether the 24-hour window applies.",
  },
  {
    name: "templates",
    description: "The tenant's approved message templates, which start outbound WhatsApp conversations.",
  },
];

/**
 * Who answers for the API, and its license: the service is private (package.json `"private": true`,
 * no license), so the document says so instead of naming an open-source license. `LicenseRef-…` is
 * SPDX's form for a license that is not on its list.
 */
const CONTACT = { name: "The CRM platform team (owners of this service)" };
const LICENSE = { name: "Proprietary: all rights reserved (UNLICENSED)", identifier: "LicenseRef-Proprietary" };

const STATUS_TEXT: Record<number, string> = {
  401: "Missing, unknown, revoked or expired API key",
  403: "Plan not eligible, or the key lacks the operation's scope",
  404: "Not found (or another tenant's)",
  409: "Conflict",
  412: "Precondition failed",
  413: "Request body too large",
  431: "Request line and headers too large",
  422: "Validation failed",
  429: "Rate limit exceeded",
  500: "Internal error",
  503: "A backing service is temporarily unavailable",
};

/** Error codes an operation can give: the common ones by its shape, plus its own (meta.errors). */
export function operationErrors(method: string, meta: Meta): ErrorCode[] {
  const codes: ErrorCode[] = [
    "INVALID_CREDENTIALS",
    "TOKEN_EXPIRED",
    "PLAN_NOT_ELIGIBLE",
    "RATE_LIMIT_EXCEEDED",
    "INTERNAL_ERROR",
    "SERVICE_UNAVAILABLE",
  ];
  if (meta.scope || meta.anyScope?.length) codes.push("PERMISSION_DENIED", "VALIDATION_ERROR");
  if (method === "post" || method === "patch" || method === "put") codes.push("PAYLOAD_TOO_LARGE");
  // A read's parameters travel in its request line: id lists may make it long (server/http-server.ts).
  if (method === "get") codes.push("REQUEST_HEADERS_TOO_LARGE");
  if (method === "post" || method === "put") codes.push("IDEMPOTENCY_KEY_REUSE_MISMATCH");
  for (const c of meta.errors ?? []) if (!codes.includes(c)) codes.push(c);
  return codes;
}

const header = (description: string) => ({ description, schema: { type: "integer" as const } });

/** An operation's example of an error code: its own, the one made from its scope (403), or the common one. */
function errorExample(code: ErrorCode, key: string, meta: Meta): ErrorExample {
  const own = OPERATION_EXAMPLES[key]?.errors?.[code];
  if (own) return own;
  if (code === "PERMISSION_DENIED" && meta.scope)
    return { message: `This key lacks the scope ${meta.scope}`, details: { requiredScope: meta.scope } };
  if (code === "PERMISSION_DENIED" && meta.anyScope?.length)
    return {
      message: `This key has none of the scopes ${meta.anyScope.join(", ")}`,
      details: { requiredScopes: [...meta.anyScope] },
    };
  return ERROR_EXAMPLES[code];
}

/** What Swagger UI shows above an error example: the code and the first words of its meaning. */
const CODE_SUMMARY: Record<ErrorCode, string> = {
  VALIDATION_ERROR: "A parameter or the body failed validation",
  IDEMPOTENCY_KEY_REUSE_MISMATCH: "The Idempotency-Key was used with another body",
  INVALID_CREDENTIALS: "Missing, unknown or revoked API key",
  TOKEN_EXPIRED: "The API key has expired",
  PERMISSION_DENIED: "The key lacks the operation's scope",
  PLAN_NOT_ELIGIBLE: "The tenant's plan has no API access",
  NOT_FOUND: "An id names nothing of this tenant",
  MESSAGING_SESSION_WINDOW_CLOSED: "The 24-hour WhatsApp session window is closed",
  APPOINTMENT_OVERLAP: "The user already has a scheduled appointment then",
  ALREADY_EXISTS: "The value (a contact's phone or e-mail, an externalId) is another object's",
  PRECONDITION_FAILED: "If-Match names none of the object's versions",
  TICKET_COMMENT_LIMIT_REACHED: "The ticket's thread is full",
  PAYLOAD_TOO_LARGE: "The request body is over the limit",
  REQUEST_HEADERS_TOO_LARGE: "The request line and headers are over the limit",
  RATE_LIMIT_EXCEEDED: "The key's per-minute or per-day quota is used up",
  INTERNAL_ERROR: "An unexpected failure",
  SERVICE_UNAVAILABLE: "The database or Redis is briefly unavailable",
};

/** A zod schema's internals, as far as they tell a strict object (catchall never). */
type ZodInternals = { _zod?: { def?: { type?: string; catchall?: ZodInternals } } };

/** What this file reads and rewrites of a generated operation and its parts. */
interface GeneratedParameter {
  name: string;
  in?: string;
  required?: boolean;
  allowEmptyValue?: boolean;
  example?: unknown;
  schema?: { minLength?: number };
}
interface MediaType {
  schema?: { $ref?: string; additionalProperties?: boolean };
  examples?: Record<string, unknown>;
}
interface Operation {
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: (GeneratedParameter | { $ref: string })[];
  requestBody?: { content?: Record<string, MediaType> };
  responses: Record<string, unknown>;
}

export function buildOpenApiDocument(router: AppRouter): OpenAPIObject {
  const doc = generateOpenApiDocument(router, {
    title: "CRM public API",
    version: "1.0.0",
    description: DESCRIPTION,
    baseUrl: "/",
    securitySchemes: { ApiKey: { type: "apiKey", in: "header", name: "X-API-Key" } },
  }) as OpenAPIObject;
  doc.info = { ...doc.info, contact: CONTACT, license: LICENSE };

  const metaByOperation = new Map<string, Meta>();
  const strictBody = new Set<string>();
  // Every procedure by its dotted path (typed as the nested record the router was built from).
  for (const proc of Object.values(router._def.procedures as unknown as Record<string, AnyProcedure>)) {
    const def = proc._def;
    const meta = def.meta as Meta | undefined;
    if (!meta?.openapi) continue;
    const key = `${meta.openapi.method.toLowerCase()} ${meta.openapi.path}`;
    metaByOperation.set(key, meta);
    // A strict zod object (catchall never) rejects unknown fields; refinements can make the
    // generator drop that fact, so it is restated from the schema itself.
    if (def.inputs?.some((i) => (i as ZodInternals | undefined)?._zod?.def?.catchall?._zod?.def?.type === "never"))
      strictBody.add(key);
  }

  doc.components ??= {};
  const components = doc.components;
  components.schemas = Object.fromEntries(
    Object.entries(components.schemas ?? {}).filter(([k]) => !k.startsWith("error.")),
  );
  components.schemas.Error = {
    type: "object",
    description: "The error envelope of every /public/v1 error.",
    required: ["error", "message", "request_id", "details"],
    additionalProperties: false,
    properties: {
      error: {
        type: "string",
        enum: Object.keys(ERROR_STATUS),
        description: "Stable code; the only field for program logic",
      },
      message: { type: "string", description: "English text for debugging; wording may change" },
      request_id: { type: "string", description: "Identifies the request, for support (also in X-Request-Id)" },
      details: {
        type: "object",
        description: "Informational context such as failed fields; not part of the stable contract",
      },
    },
  };
  components.headers = {
    "X-RateLimit-Limit": header("The key's per-minute ceiling"),
    "X-RateLimit-Remaining": header("Requests left in the current window"),
    "X-RateLimit-Reset": header("Unix time (seconds) at which the window resets"),
    "Retry-After": header("Seconds until a retry can succeed"),
    "RateLimit-Policy": {
      description:
        'The key\'s quota windows (draft-ietf-httpapi-ratelimit-headers): `"minute";q=180;w=60, "day";q=50000;w=86400` (q: the ceiling, w: the window in seconds). Without a valid key: the anonymous minute ceiling only',
      schema: { type: "string" as const },
    },
    RateLimit: {
      description:
        'Each window\'s state: `"minute";r=170;t=30, "day";r=49990;t=51234` (r: requests left, t: seconds until it resets). The day is left out when it is not known (no valid key; a request over the minute ceiling)',
      schema: { type: "string" as const },
    },
    "X-Poll-Interval": header(
      "Seconds a client that does not long-poll (`wait`) should leave between two calls once caught up",
    ),
    "X-Request-Id": {
      description: "The request id (also request_id in error bodies)",
      schema: { type: "string" as const },
    },
    ETag: {
      description: 'The object\'s version as an entity tag, e.g. `"3"` (the `version` field, quoted)',
      schema: { type: "string" as const },
    },
    Location: { description: "The path of the object created", schema: { type: "string" as const } },
    "Cache-Control": {
      description: "The answer is the key's own: no shared cache keeps it, a client's cache revalidates it",
      schema: { type: "string" as const, const: API_CACHE_HEADERS["Cache-Control"] },
    },
    Vary: { description: "The answer depends on the API key", schema: { type: "string" as const } },
    "X-Content-Type-Options": {
      description: "The body is of its declared Content-Type only",
      schema: { type: "string" as const, const: API_CACHE_HEADERS["X-Content-Type-Options"] },
    },
  };
  components.parameters = {
    IdempotencyKey: {
      name: "Idempotency-Key",
      in: "header",
      required: false,
      description:
        "Makes the create safe to retry: a repeat with the same key and body replays the original response without a second side effect; the same key with a different body gives 422 IDEMPOTENCY_KEY_REUSE_MISMATCH. Remembered for 24 hours. Any unique value the client makes, e.g. a UUID such as `0b9d3c4e-5f61-4a72-8b93-a4c5d6e7f801`.",
      schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7E]+$" },
    },
    IfMatch: {
      name: "If-Match",
      in: "header",
      required: false,
      description:
        'Write only if the object is still at one of these versions: `"3"`, a list `"3", "4"`, or `*` (any version). When none matches: 412 PRECONDITION_FAILED with the current `ETag` and `details.currentVersion`, and nothing is written. Checked after the 404 and the body\'s validation, atomically with the write. A malformed value gives 422 naming the header.',
      schema: { type: "string", maxLength: 8192 },
    },
    IfNoneMatch: {
      name: "If-None-Match",
      in: "header",
      required: false,
      description:
        'The `ETag` a client holds (e.g. `"3"`): when the object is still at that version, 304 Not Modified without a body.',
      schema: { type: "string", maxLength: 8192 },
    },
  };
  const versioned = (op: Operation): boolean => {
    const ok = op.responses?.["200"] as { content?: Record<string, MediaType> } | undefined;
    const ref = ok?.content?.["application/json"]?.schema?.$ref;
    const schemas = components.schemas as Record<string, { properties?: Record<string, unknown> }>;
    const schema = ref ? schemas[ref.split("/").pop()!] : undefined;
    return !!schema?.properties?.version;
  };
  const etagHeaders = (h: Record<string, unknown>) => ({ ...h, ETag: { $ref: "#/components/headers/ETag" } });
  // What every answer carries: the rate-limit state, the request id and the cache headers.
  const rateHeaders = {
    "X-RateLimit-Limit": { $ref: "#/components/headers/X-RateLimit-Limit" },
    "X-RateLimit-Remaining": { $ref: "#/components/headers/X-RateLimit-Remaining" },
    "X-RateLimit-Reset": { $ref: "#/components/headers/X-RateLimit-Reset" },
    "RateLimit-Policy": { $ref: "#/components/headers/RateLimit-Policy" },
    RateLimit: { $ref: "#/components/headers/RateLimit" },
    "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" },
    "Cache-Control": { $ref: "#/components/headers/Cache-Control" },
    Vary: { $ref: "#/components/headers/Vary" },
    "X-Content-Type-Options": { $ref: "#/components/headers/X-Content-Type-Options" },
  };

  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item as Record<string, Operation>)) {
      const meta = metaByOperation.get(`${method} ${path}`);
      if (!meta) continue;
      op.security = [{ ApiKey: [] }];
      const scopeLine = meta.scope
        ? `Scope: \`${meta.scope}\`.`
        : meta.anyScope?.length
          ? `Scope: at least one of ${meta.anyScope.map((s) => `\`${s}\``).join(", ")} (see above).`
          : "Scope: none (a valid key of a tenant on an eligible plan).";
      op.description = [op.description, scopeLine].filter(Boolean).join("\n\n");
      const key = `${method.toUpperCase()} ${path}`;
      const example = OPERATION_EXAMPLES[key];
      for (const p of (op.parameters ?? []) as GeneratedParameter[]) {
        if (p.in === "query" && !p.required) {
          // The REST adapter drops an empty query value: `?search=` is the same request as no
          // `search`. Said with allowEmptyValue, and a lower length bound of 1 (zod's min(1), which
          // only a tRPC caller can reach) is not the wire's.
          p.allowEmptyValue = true;
          if (p.schema?.minLength === 1) delete p.schema.minLength;
        }
        const value = example?.parameters?.[p.name];
        if (value !== undefined) p.example = value;
      }
      const parameters = op.parameters ?? [];
      if (method === "post" || method === "put") parameters.push({ $ref: "#/components/parameters/IdempotencyKey" });
      const hasVersion = versioned(op);
      if (meta.errors?.includes("PRECONDITION_FAILED")) parameters.push({ $ref: "#/components/parameters/IfMatch" });
      if (method === "get" && hasVersion) parameters.push({ $ref: "#/components/parameters/IfNoneMatch" });
      if (parameters.length) op.parameters = parameters;
      const media = op.requestBody?.content?.["application/json"];
      const body = media?.schema;
      if (body && strictBody.has(`${method} ${path}`)) body.additionalProperties = false;
      if (media && example?.body) media.examples = { demo: { summary: example.summary, value: example.body } };

      const success = op.responses["200"] as object | undefined;
      const status = String(meta.successStatus ?? 200);
      const okHeaders = hasVersion ? etagHeaders(rateHeaders) : rateHeaders;
      const responses: Record<string, unknown> = meta.upsert
        ? {
            "200": { ...success, description: "Updated, or unchanged (nothing written)", headers: okHeaders },
            "201": {
              ...success,
              description: "Created",
              headers: { ...okHeaders, Location: { $ref: "#/components/headers/Location" } },
            },
          }
        : {
            [status]: {
              ...success,
              description: status === "201" ? "Created" : "OK",
              // A create whose object has a path of its own says where (meta.location).
              headers: meta.location
                ? { ...okHeaders, Location: { $ref: "#/components/headers/Location" } }
                : okHeaders,
            },
          };
      if (method === "get" && hasVersion)
        responses["304"] = {
          description: "Not Modified: If-None-Match names the object's version (no body)",
          headers: etagHeaders(rateHeaders),
        };
      const byStatus = new Map<number, ErrorCode[]>();
      for (const code of operationErrors(method, meta)) {
        const s = ERROR_STATUS[code];
        byStatus.set(s, [...(byStatus.get(s) ?? []), code]);
      }
      for (const [s, codes] of [...byStatus.entries()].sort((a, b) => a[0] - b[0])) {
        const examples = Object.fromEntries(
          codes.map((code) => {
            const { message, details = {} } = errorExample(code, key, meta);
            return [
              code,
              { summary: CODE_SUMMARY[code], value: { error: code, message, request_id: EXAMPLE_REQUEST_ID, details } },
            ];
          }),
        );
        responses[String(s)] = {
          description: `${STATUS_TEXT[s] ?? "Error"}: ${codes.join(", ")}`,
          headers:
            s === 429
              ? { ...rateHeaders, "Retry-After": { $ref: "#/components/headers/Retry-After" } }
              : s === 431
                ? // Answered before the key is read (server/http-server.ts): no quota state to tell.
                  Object.fromEntries(
                    Object.entries(rateHeaders).filter(
                      ([h]) => !h.startsWith("X-RateLimit-") && !h.startsWith("RateLimit"),
                    ),
                  )
                : s === 412 && !meta.upsert
                  ? etagHeaders(rateHeaders)
                  : rateHeaders,
          content: {
            "application/json": {
              schema: {
                allOf: [{ $ref: "#/components/schemas/Error" }],
                properties: { error: { type: "string", enum: codes } },
              },
              examples,
            },
          },
        };
      }
      // A polled operation's every answer says how long to leave between calls (rest/facade.ts).
      if (meta.pollInterval !== undefined)
        for (const r of Object.values(responses) as { headers?: Record<string, unknown> }[])
          r.headers = { ...r.headers, "X-Poll-Interval": { $ref: "#/components/headers/X-Poll-Interval" } };
      op.responses = responses;
    }
  }
  // The tags after info and servers, before the paths (where readers look for them).
  const { paths, components: built, ...head } = doc;
  return { ...head, tags: TAGS, paths, components: built } as OpenAPIObject;
}
