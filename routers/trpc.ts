// initTRPC, the context, and the procedure builders every operation starts from:
//   authed            valid key of an eligible tenant (checked by server/auth before the procedure)
//   scoped(scope)     + the exact scope of the endpoint (403 PERMISSION_DENIED) and a usable body
//   scopedAny(scopes) + at least one of several scopes (an operation over several resources, e.g.
//                     GET /changes, which then narrows to what the key can read), and a usable body
// Check order over the whole request: 401 → plan 403 → 429 → scope 403 → 422 → 404 → 409; in a /trpc
// batch the same order per call (rest/trpc.ts admits each call; a call over the quota answers its 429 here).
// An input with no required field may be left out by a tRPC caller (`me.get.query()`,
// `leads.list.query()`): the builders pass `{}` for a call without input, and their `.input()` types
// such an input as omittable (LenientBuilder) — centrally, so no procedure declares it.
import { initTRPC } from "@trpc/server";
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import type { inferParser, Parser, ProcedureBuilder, UnsetMarker } from "@trpc/server/unstable-core-do-not-import";
import type { OpenApiMeta } from "trpc-to-openapi";
import type { Caller } from "../server/auth/authenticate.js";
import type { Scope } from "../server/auth/scopes.js";
import type { Database, Db } from "../server/db/client.js";
import { AppError, envelope, toAppError, type ErrorCode } from "../server/errors.js";
import { ITEMS_BUDGET_BYTES, type OversizeAllowance } from "./_lib/page-budget.js";
import { nameHolder, type EntityTags } from "./_lib/sync.js";
import type { Services } from "../server/services.js";
import type { QuotaWindow } from "../server/limits/quotas.js";

/**
 * What a transport tells the core about a call beyond its input, parsed once at its edge (REST and
 * /trpc: rest/facts.ts; in-process: server/core.ts). Headers that did not parse are kept as their
 * 422, raised by the operation that reads them, where it reads them (so the order of checks is the
 * same whatever the transport).
 */
export interface RequestFacts {
  transport: "rest" | "trpc" | "in-process";
  /** Idempotency-Key, validated (1–255 visible ASCII characters). */
  idempotencyKey?: string;
  /** If-Match, parsed: `*` or the versions it names. */
  ifMatch?: EntityTags;
  /** If-None-Match as sent: REST answers a GET-one's with 304 itself; an operation only sees that it was given. */
  ifNoneMatch?: string;
  /** The headers above when they did not parse: their 422s. */
  problems?: { idempotencyKey?: AppError; ifMatch?: AppError };
  /** A problem of the input found by the transport (a body it could not use): 422 after the scope check. */
  inputProblem?: AppError;
  /** Input fields the transport received twice and took from the path (REST: a PUT body naming its path's externalId). */
  shadowed?: readonly string[];
  /** The key's quota windows after this request was counted (the guard's; absent: read them when needed). */
  quota?: readonly QuotaWindow[];
  /** A /trpc batch: the calls the quota refused, by call index (each answers its own 429 while the others run). */
  refusals?: readonly (AppError | undefined)[];
}

/**
 * What a call did beyond its answer, for the transport to say (REST: the status, `Location`,
 * `Idempotent-Replayed`; /trpc: `Idempotent-Replayed`; in-process: the caller reads it). One per call.
 */
export interface Outcome {
  /** An upsert by external id: created (REST: 201 with Location), updated or unchanged (200). */
  upserted?: "created" | "updated" | "unchanged";
  /** The answer is an Idempotency-Key's stored one. */
  replayed?: boolean;
}

export interface Context {
  services: Services;
  requestId: string;
  caller?: Caller;
  request: RequestFacts;
  /** Each call's outcome by its index in a /trpc batch (0 for a single call): what the transport reads afterwards. */
  outcomes: Outcome[];
  /**
   * The database of the caller's tenant: services.db, or with DATABASE_ROUTING=workers the worker
   * that holds the tenant's shards (server/db/routing.ts). Every statement of the operation goes here.
   */
  database: Database;
  /** Where queries run: `database`'s root client, or the transaction of an idempotent create. */
  db: Db;
  /**
   * The bytes a list page's items may take (routers/_lib/page-budget.ts): ITEMS_BUDGET_BYTES, or a
   * /trpc batch's share of the one page budget of its response (rest/trpc.ts, batchRules).
   */
  pageBudget: number;
  /**
   * A /trpc batch's one allowance for a page item larger than the call's share (page-budget.ts
   * `oversizedAllowed`); undefined when the call is alone (its page always holds at least one item).
   */
  oversized?: OversizeAllowance;
}

/** What a transport hands createContext(): the facts, who calls, and a batch's page shares. */
export interface CallSetup {
  requestId: string;
  request: RequestFacts;
  caller?: Caller;
  batch?: { pageBudget: number; oversized: OversizeAllowance };
}

export async function createContext(services: Services, call: CallSetup): Promise<Context> {
  const database = call.caller && services.routes ? await services.routes.forTenant(call.caller.tenantId) : services.db;
  return {
    services,
    requestId: call.requestId,
    caller: call.caller,
    request: call.request,
    outcomes: [],
    database,
    db: database.prisma,
    pageBudget: call.batch?.pageBudget ?? ITEMS_BUDGET_BYTES,
    oversized: call.batch?.oversized,
  };
}

export type Meta = OpenApiMeta<{
  /** HTTP status of a success (default 200). */
  successStatus?: number;
  /** The created object's path, `{id}` its id: REST sends it as `Location` with a 201. */
  location?: string;
  /** The exact scope the operation needs (null: none, e.g. /me). Set by scoped(). */
  scope?: Scope | null;
  /** Set by scopedAny(): the operation needs at least one of these scopes (and narrows itself). */
  anyScope?: Scope[];
  /** An upsert by external id: 201 when it created (with Location), 200 when it updated or changed nothing. */
  upsert?: boolean;
  /** The operation can wait (a long-poll): REST hands it the request's abort signal (patches/trpc-to-openapi). */
  abortable?: boolean;
  /** Seconds a client that polls the operation should leave between calls: REST's `X-Poll-Interval` on every answer. */
  pollInterval?: number;
  /** Operation-specific error codes (404/409 …) for the OpenAPI document; the common ones are added there. */
  errors?: ErrorCode[];
}>;

/** Every operation of a router: its path (`leads.create`) and its meta. */
export function operations(router: { _def: { procedures: object } }): { path: string; meta: Meta }[] {
  return Object.entries(router._def.procedures as Record<string, { _def: { meta?: Meta } }>).map(([path, proc]) => ({
    path,
    meta: proc._def.meta ?? {},
  }));
}

/** tRPC's code for each status an AppError can have (data.code / the JSON-RPC code of a tRPC error). */
const TRPC_KEY_BY_STATUS: Record<number, TRPC_ERROR_CODE_KEY> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  409: "CONFLICT",
  412: "PRECONDITION_FAILED",
  413: "PAYLOAD_TOO_LARGE",
  422: "UNPROCESSABLE_CONTENT",
  429: "TOO_MANY_REQUESTS",
  503: "SERVICE_UNAVAILABLE",
};

/**
 * The one error shape, for both transports. `envelope`/`status` at the top are what the REST facade
 * keeps (rest/facade.ts); `message`/`code`/`data` are tRPC's own shape, which @trpc/client parses —
 * `data.httpStatus` is the HTTP status tRPC answers with and `data.envelope` the same public envelope.
 * Also used by rest/trpc.ts for the guard's 401/403/429 on /trpc.
 */
/** tRPC's code of an HTTP status (INTERNAL_SERVER_ERROR for any other). */
export const trpcKeyOf = (status: number): TRPC_ERROR_CODE_KEY => TRPC_KEY_BY_STATUS[status] ?? "INTERNAL_SERVER_ERROR";

export function trpcErrorShape(app: AppError, requestId: string, path?: string) {
  const key = trpcKeyOf(app.status);
  return {
    message: firstReason(app),
    code: TRPC_ERROR_CODES_BY_KEY[key],
    data: { code: key, httpStatus: app.status, path, envelope: envelope(app, requestId) },
  };
}

/**
 * The tRPC error's `message` (what TRPCClientError.message shows): for a VALIDATION_ERROR that names
 * its fields, the first one's reason, `customerPhone: not a possible phone number for its region`,
 * with ` (+N more)` when there are others (all of them are in data.envelope.details.fields); else the
 * envelope's message.
 */
export function firstReason(app: AppError): string {
  const fields = app.code === "VALIDATION_ERROR" ? app.details.fields : undefined;
  const first = Array.isArray(fields) ? (fields[0] as { field?: unknown; message?: unknown } | undefined) : undefined;
  if (!first || typeof first.field !== "string" || typeof first.message !== "string") return app.message;
  const count = typeof app.details.fieldCount === "number" ? app.details.fieldCount : (fields as unknown[]).length;
  return `${first.field}: ${first.message}${count > 1 ? ` (+${count - 1} more)` : ""}`;
}

const t = initTRPC
  .context<Context>()
  .meta<Meta>()
  .create({
    errorFormatter({ error, ctx, path }) {
      return trpcErrorShape(toAppError(error), ctx?.requestId ?? "", path);
    },
  });

export const router = t.router;
export const middleware = t.middleware;
export const createCallerFactory = t.createCallerFactory;

/**
 * The caller the guard authenticated (server/auth), or 401: every operation but the public document
 * needs one. In a /trpc batch, a call the quota refused (rest/trpc.ts) answers its 429 here.
 */
function callerOf(ctx: Context, batchIndex: number): Caller {
  if (!ctx.caller) throw new AppError("INVALID_CREDENTIALS", "Missing X-API-Key header");
  const refused = ctx.request.refusals?.[batchIndex];
  if (refused) throw refused;
  return ctx.caller;
}

/** A call's input as sent, `{}` when the call sent none (a tRPC call without argument; never the case over REST). */
const inputOrEmpty = (getRawInput: () => Promise<unknown>) => async () => {
  const raw = await getRawInput();
  return raw === undefined ? {} : raw;
};

/** An input type every field of which is optional (`{}` passes): a caller may leave the input out. */
type OmittableWhenEmpty<T> = Record<never, never> extends T ? T | undefined : T;

/**
 * The builders' type: tRPC's procedure builder whose `.input(schema)` types an input without a
 * required field as omittable (`leads.list.query()` type-checks; at run time the builder passed `{}`).
 * Only `.meta()` and `.input()` differ; everything after `.input()` is tRPC's own builder.
 */
export type LenientBuilder<B> =
  B extends ProcedureBuilder<infer C, infer M, infer O, UnsetMarker, UnsetMarker, infer OI, infer OO, infer K, infer E>
    ? Omit<B, "meta" | "input"> & {
        meta(meta: M): LenientBuilder<B>;
        input<$Parser extends Parser>(
          schema: $Parser,
        ): ProcedureBuilder<
          C,
          M,
          O,
          OmittableWhenEmpty<inferParser<$Parser>["in"]>,
          inferParser<$Parser>["out"],
          OI,
          OO,
          K,
          E
        >;
      }
    : never;

const lenient = <B>(builder: B) => builder as LenientBuilder<B>;

// Each builder is ONE middleware (authentication, scope and body problem together): tRPC copies the
// call's options at every middleware level, so one level per procedure is the cheap shape. Only the
// keys a middleware adds are passed to next(); tRPC merges them into the context.
// `getRawInput` passed to next() (tRPC reads it there) makes a call without input `{}`; the typed
// overloads of next() take either `ctx` or `getRawInput`, tRPC itself takes both.
// Each call gets its own Outcome, registered by its batch index for the transport to read afterwards.
type NextOpts = { ctx: { caller: Caller; tenantId: string; outcome: Outcome } };
const nextOpts = (ctx: Context, caller: Caller, batchIndex: number, getRawInput: () => Promise<unknown>) => {
  const outcome: Outcome = {};
  ctx.outcomes[batchIndex] = outcome;
  return { ctx: { caller, tenantId: caller.tenantId, outcome }, getRawInput: inputOrEmpty(getRawInput) } as NextOpts;
};

export const authed = lenient(
  t.procedure.use(({ ctx, next, batchIndex, getRawInput }) => {
    const caller = callerOf(ctx, batchIndex);
    return next(nextOpts(ctx, caller, batchIndex, getRawInput));
  }),
);

export function scoped(scope: Scope) {
  return lenient(
    t.procedure.meta({ scope }).use(async ({ ctx, next, batchIndex, getRawInput, type }) => {
      const caller = callerOf(ctx, batchIndex);
      if (!caller.scopes.includes(scope))
        throw new AppError("PERMISSION_DENIED", `This key lacks the scope ${scope}`, { requiredScope: scope });
      if (ctx.request.inputProblem) throw ctx.request.inputProblem;
      const result = await next(nextOpts(ctx, caller, batchIndex, getRawInput));
      // A write has committed by now: the tenant's waiting long-polls read the feed again (server/wakeups.ts).
      if (result.ok && type === "mutation") ctx.services.wakeups?.notify(caller.tenantId);
      // A conflict names its holder once the refused write's transaction has ended (routers/_lib/sync.ts).
      if (!result.ok) await nameHolder(result.error.cause, ctx.database.prisma);
      // An input the zod schema refused becomes its bounded envelope here, once (server/errors.ts
      // zodDetails caps the field list): otherwise the REST adapter would also serialize zod's raw
      // issues (one per unknown key) into a response body that is then thrown away.
      if (
        !result.ok &&
        result.error.code === "BAD_REQUEST" &&
        (result.error.cause as { name?: unknown } | undefined)?.name === "ZodError"
      )
        throw toAppError(result.error);
      return result;
    }),
  );
}

/** Like scoped(), for an operation that needs any one of `scopes` (403 PERMISSION_DENIED when the key has none). */
export function scopedAny(scopes: readonly Scope[]) {
  return lenient(
    t.procedure.meta({ anyScope: [...scopes] }).use(({ ctx, next, batchIndex, getRawInput }) => {
      const caller = callerOf(ctx, batchIndex);
      if (!scopes.some((s) => caller.scopes.includes(s)))
        throw new AppError("PERMISSION_DENIED", `This key has none of the scopes ${scopes.join(", ")}`, {
          requiredScopes: [...scopes],
        });
      if (ctx.request.inputProblem) throw ctx.request.inputProblem;
      return next(nextOpts(ctx, caller, batchIndex, getRawInput));
    }),
  );
}

export type AuthedContext = Context & { caller: Caller; tenantId: string; outcome: Outcome };
