// A typed client for the public REST API: openapi-fetch over the types that openapi-typescript
// generates from openapi.json into client/schema.d.ts (`npm run client:types`; CI fails when stale).
//
//   const crm = createCrmClient("http://127.0.0.1:3000", process.env.CRM_API_KEY!);
//   const { data, error, response } = await crm.GET("/public/v1/leads", { params: { query: { dateFrom } } });
//
// Every call is typed from the document: paths, path/query/header parameters (Idempotency-Key on
// creates), request bodies, and `data` (the success body) / `error` (the error envelope) by status.
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

export type CrmClient = Client<paths>;

/** Options passed on to openapi-fetch (e.g. a custom `fetch`); the base URL and key are arguments. */
export type CrmClientOptions = Omit<ClientOptions, "baseUrl" | "headers"> & { headers?: Record<string, string> };

/**
 * A client for the service at `baseUrl` (its origin, e.g. "https://crm.example.com": the paths
 * already start with /public/v1) that sends `apiKey` as X-API-Key on every request.
 */
export function createCrmClient(baseUrl: string, apiKey: string, options: CrmClientOptions = {}): CrmClient {
  return createClient<paths>({
    ...options,
    baseUrl: baseUrl.replace(/\/+$/, ""),
    headers: { ...options.headers, "X-API-Key": apiKey },
  });
}

// Named shapes. The document declares its schemas inline (no components.schemas other than Error),
// so the resource types are taken from the operations that return them.
type Json<T> = T extends { content: { "application/json": infer B } } ? B : never;
type Ok<Op extends keyof operations, S extends keyof operations[Op]["responses"]> = Json<
  operations[Op]["responses"][S]
>;

export type Me = Ok<"me-get", 200>;
export type Lead = Ok<"leads-get", 200>;
export type LeadList = Ok<"leads-list", 200>;
export type Contact = Ok<"contacts-create", 201>;
export type Conversation = Ok<"conversations-start", 201>;
export type Message = Ok<"conversations-messages-send", 201>;
export type Appointment = Ok<"appointments-create", 201>;
export type Availability = Ok<"availability-get", 200>;
export type AvailabilitySlot = Availability["slots"][number];
export type Ticket = Ok<"tickets-create", 201>;
export type TicketComment = Ticket["comments"][number];
/** The error envelope of every /public/v1 error: program against `error` only. */
export type ApiError = components["schemas"]["Error"];
export type ErrorCode = ApiError["error"];
export type ChangePage = Ok<"changes-list", 200>;
export type Change = ChangePage["items"][number];
export type ChangeType = Change["type"];

/** An error answer of the API, thrown by the helpers below (the calls themselves return `error`). */
export class CrmError extends Error {
  constructor(
    readonly status: number,
    readonly envelope: ApiError,
  ) {
    super(`${status} ${envelope.error}: ${envelope.message}`);
    this.name = "CrmError";
  }
  /** The `since` token is too old (or ahead of the feed): start again without it and rebuild the mirror. */
  get sinceExpired(): boolean {
    return (
      this.envelope.error === "VALIDATION_ERROR" &&
      (this.envelope.details as { code?: unknown }).code === "since_expired"
    );
  }
}

/**
 * Follows the changes feed (GET /public/v1/changes) from `since` — absent: from the beginning, every
 * live object once — until it has caught up, yielding each page. Persist the last page's `nextSince`
 * (after applying its items) and pass it next time. Throws CrmError on an error answer
 * (`err.sinceExpired`: start again without `since`).
 *
 *   for await (const page of followChanges(crm, { since })) {
 *     for (const c of page.items) c.action === "delete" ? remove(c.type, c.id) : upsert(c.type, c.id, c.data);
 *     since = page.nextSince;
 *   }
 */
export async function* followChanges(
  client: CrmClient,
  opts: { since?: string; types?: ChangeType[]; limit?: number } = {},
): AsyncGenerator<ChangePage, void, undefined> {
  let since = opts.since;
  const types = opts.types?.join(",");
  for (;;) {
    const { data, error, response } = await client.GET("/public/v1/changes", {
      params: { query: { since, types, limit: opts.limit } },
    });
    if (error !== undefined || data === undefined) throw new CrmError(response.status, error as ApiError);
    yield data;
    since = data.nextSince;
    if (!data.hasMore) return;
  }
}
