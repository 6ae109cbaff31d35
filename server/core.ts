// The tRPC core in-process, for internal TypeScript code (a job, a script, another module): the
// same procedures as /public/v1 and /trpc, called with tRPC's own server-side caller, no HTTP.
//
//   const core = await openCore();                       // the configuration `npm start` reads
//   const api = core.as(apiKey).api;                     // every check an HTTP call gets
//   await api.leads.list({ limit: 10 });
//   const call = core.as(apiKey).with({ idempotencyKey: "k-1" });
//   await call.api.leads.create({ customerName: "Ana" });
//   call.outcome.replayed;                               // false, then true for the same key again
//   await core.close();
//
// `openCore()` opens the database of the configuration (`DATABASE_URL`, else the embedded folder
// PGLITE_DATA_DIR, which has one owner: not a running service's folder), migrates it, loads the demo
// tenant on an empty embedded folder exactly as `npm start` does (`demoKey`), and runs the instance's
// background work (server/background.ts: the feed's sequencer, the purges, the delivery sweep) unless
// `background: false`. Two kinds of caller:
//   - `as(apiKey)`: each call is checked and counted exactly as an HTTP request (key, plan, quota,
//     scopes) and answers the same; Idempotency-Key shares the namespace of REST calls with the same
//     key and operation;
//   - `as({ tenantId, userId, scopes })`: trusted code acting as a user of a tenant with the scopes
//     stated, with no key and no quota. It can do whatever those scopes allow to that tenant's data,
//     so only code the operator runs may hold it (never a value from a request). Idempotency-Key is
//     refused there (422): its records belong to an API key.
// A failure is a TRPCError with the code of its HTTP status, whose `cause` is a CoreError carrying
// that status and the public envelope ({error, message, request_id, details}) REST would answer.
import { randomUUID } from "node:crypto";
import { isTrackedEnvelope, TRPCError } from "@trpc/server";
import type { TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import { appRouter } from "../routers/index.js";
import {
  createCallerFactory,
  createContext,
  firstReason,
  trpcKeyOf,
  type Context,
  type Outcome,
  type RequestFacts,
} from "../routers/trpc.js";
import type { EntityTags } from "../routers/_lib/sync.js";
import { loadFixture } from "./admin/fixture.js";
import { demoFixture } from "./admin/demo.js";
import type { Caller } from "./auth/authenticate.js";
import { admitKey, keyAdmission } from "./auth/guard.js";
import { parseScopes, type Scope } from "./auth/scopes.js";
import { startBackground, type Background } from "./background.js";
import { closeServices, createServices } from "./bootstrap.js";
import { loadConfig, type Config } from "./config.js";
import { AppError, envelope, toAppError } from "./errors.js";
import { readIdempotencyKey } from "./idempotency.js";
import type { Services } from "./services.js";

const callerFactory = createCallerFactory(appRouter);
/** The router's server-side caller: `api.leads.create(input)`, typed as the router is. */
export type CoreApi = ReturnType<typeof callerFactory>;

/** Trusted internal code acting as a user of a tenant (no key, no quota). */
export interface InternalActor {
  tenantId: string;
  userId: string;
  /** The scopes it acts with ("all": every scope). */
  scopes: readonly Scope[] | "all";
}

/** Per-call options: what an HTTP call would send as headers. */
export interface CallOptions {
  idempotencyKey?: string;
  /** If-Match: the version(s) the object must have, or "*" (any current version). */
  ifMatch?: number | readonly number[] | "*";
}

/** A caller with options: `api` to call, `outcome` what its latest finished call did (created, replayed …). */
export interface Call {
  api: CoreApi;
  outcome: Outcome;
}

export interface Session extends Call {
  with(opts: CallOptions): Call;
}

export interface Core {
  services: Services;
  /** The demo tenant's key, when this open loaded the demo (an empty embedded folder). */
  demoKey?: string;
  as(who: string | InternalActor): Session;
  close(): Promise<void>;
}

/** The error a failed in-process call carries as its TRPCError's cause: its HTTP status and the public envelope. */
export class CoreError extends Error {
  readonly status: number;
  readonly code: string;
  readonly envelope: ReturnType<typeof envelope>;
  constructor(app: AppError, requestId: string) {
    super(app.message);
    this.name = "CoreError";
    this.status = app.status;
    this.code = app.code;
    this.envelope = envelope(app, requestId);
  }
}

export interface OpenCoreOptions {
  /** Configuration (default: the environment, as `npm start` reads it). */
  config?: Config;
  /** The services of a process that already runs them (its HTTP app's): shared, not closed by close(), no demo loaded. */
  services?: Services;
  /** Run the instance's background work (default true). */
  background?: boolean;
}

export async function openCore(opts: OpenCoreOptions = {}): Promise<Core> {
  if (opts.services) {
    const shared = opts.services;
    return { services: shared, as: (who) => session(shared, who), close: async () => {} };
  }
  const config = opts.config ?? loadConfig();
  const services = await createServices(config);
  let demoKey: string | undefined;
  try {
    if (!config.databaseUrl && !config.noDemo && (await services.db.prisma.tenant.count()) === 0) {
      const ids = await loadFixture(services.db, demoFixture(new Date(), { fixedIds: true }));
      demoKey = ids.tenants.demo!.apiKeys.demo!.key;
    }
  } catch (err) {
    await closeServices(services);
    throw err;
  }
  const background: Background | undefined = opts.background === false ? undefined : startBackground(services);
  return {
    services,
    demoKey,
    as: (who) => session(services, who),
    async close() {
      background?.stop();
      await closeServices(services);
    },
  };
}

/** The TRPCError of a failure: the code of its HTTP status, a CoreError (status, envelope) as its cause. */
function coreError(err: unknown, requestId: string): TRPCError {
  const app = toAppError(err);
  return new TRPCError({
    code: trpcKeyOf(app.status) as TRPC_ERROR_CODE_KEY,
    message: firstReason(app),
    cause: new CoreError(app, requestId),
  });
}

const entityTags = (v: CallOptions["ifMatch"]): EntityTags | undefined =>
  v === undefined
    ? undefined
    : v === "*"
      ? { any: true, strong: [], weak: [] }
      : { any: false, strong: typeof v === "number" ? [v] : [...v], weak: [] };

function session(services: Services, who: string | InternalActor): Session {
  const admission = typeof who === "string" ? keyAdmission(services) : undefined;
  /** The caller of one call: a key admitted (and counted) as an HTTP request is, or the internal actor. */
  const callerOf = async (): Promise<Caller> => {
    if (typeof who !== "string") return internalCaller(services, who);
    const decision = await admitKey(services, admission!, who);
    if (decision.admitted) return decision.caller!;
    if (decision.quota.window) services.metrics.rateLimited.inc({ window: decision.quota.window });
    throw decision.refusal;
  };
  const call = (opts: CallOptions): Call => {
    const outcome: Outcome = {};
    const request: RequestFacts = { transport: "in-process", ifMatch: entityTags(opts.ifMatch) };
    if (opts.idempotencyKey !== undefined) {
      try {
        if (typeof who !== "string")
          throw new AppError(
            "VALIDATION_ERROR",
            "Idempotency-Key: an internal actor has no API key to keep its records under",
            {
              fields: [
                {
                  field: "Idempotency-Key",
                  code: "invalid_header",
                  message: "not available to an internal actor (use an API key's caller)",
                },
              ],
            },
          );
        request.idempotencyKey = readIdempotencyKey(opts.idempotencyKey);
      } catch (err) {
        request.problems = { idempotencyKey: toAppError(err) };
      }
    }
    const api = callProxy(async (path, input) => {
      const requestId = randomUUID();
      let ctx: Context | undefined;
      try {
        ctx = await createContext(services, { requestId, request, caller: await callerOf() });
        let target: unknown = callerFactory(ctx);
        for (const segment of path) target = (target as Record<string, unknown>)[segment];
        const result = await (target as (i: unknown) => Promise<unknown>)(input);
        return isAsyncIterable(result) ? events(result, requestId) : result;
      } catch (err) {
        throw coreError(err, requestId);
      } finally {
        // The outcome of this call replaces the previous one's.
        delete outcome.upserted;
        delete outcome.replayed;
        Object.assign(outcome, ctx?.outcomes[0]);
      }
    });
    return { api, outcome };
  };
  const plain = call({});
  return { ...plain, with: call };
}

const isAsyncIterable = (v: unknown): v is AsyncIterable<unknown> =>
  typeof v === "object" && v !== null && Symbol.asyncIterator in v;

/**
 * A subscription's events as an HTTP client receives them: a tracked() event as `{ id, data }`
 * (tRPC's TrackedData, what the router's types promise), a failure as the core's error with its
 * envelope. The caller's loop ending (break, return) ends the subscription.
 */
async function* events(source: AsyncIterable<unknown>, requestId: string): AsyncGenerator<unknown, void, unknown> {
  try {
    for await (const v of source) yield isTrackedEnvelope(v) ? { id: v[0], data: v[1] } : v;
  } catch (err) {
    throw coreError(err, requestId);
  }
}

/** A proxy typed as the router's caller whose calls go through `run` with the procedure's path. */
function callProxy(run: (path: string[], input: unknown) => Promise<unknown>): CoreApi {
  const at = (path: string[]): unknown =>
    new Proxy(() => {}, {
      get: (_t, prop) => (typeof prop === "string" && prop !== "then" ? at([...path, prop]) : undefined),
      apply: (_t, _this, args: unknown[]) => run(path, args[0]),
    });
  return at([]) as CoreApi;
}

/** The caller of trusted internal code: the tenant's settings and the user, read once per call (a user removed meanwhile is refused). */
async function internalCaller(services: Services, actor: InternalActor): Promise<Caller> {
  type Row = {
    plan: Caller["plan"];
    timezone: string;
    defaultCountry: string | null;
    slotMinutes: number;
    perMinute: number;
    perDay: number;
  };
  const [row] = await services.db.prisma.$queryRaw<Row[]>`
    SELECT t."plan", t."timezone", t."defaultCountry", t."slotMinutes",
           COALESCE(t."rateLimitPerMinute", p."perMinute") AS "perMinute", COALESCE(t."rateLimitPerDay", p."perDay") AS "perDay"
      FROM "Tenant" t JOIN "User" u ON u."tenantId" = t."id" JOIN "PlanLimit" p ON p."plan" = t."plan"
     WHERE t."id" = ${actor.tenantId}::uuid AND u."tenantId" = ${actor.tenantId}::uuid AND u."id" = ${actor.userId}::uuid`;
  if (!row) throw new AppError("NOT_FOUND", "No such user in that tenant");
  let scopes: Scope[];
  try {
    scopes = parseScopes(actor.scopes === "all" ? "all" : [...actor.scopes]);
  } catch (err) {
    throw new AppError("VALIDATION_ERROR", `scopes: ${(err as Error).message}`, {
      fields: [{ field: "scopes", code: "invalid_scope", message: (err as Error).message }],
    });
  }
  return {
    keyId: "",
    keyPrefix: "",
    keyHash: "",
    tenantId: actor.tenantId,
    ownerId: actor.userId,
    plan: row.plan,
    scopes,
    // The tenant's ceilings, as /me shows them; nothing is counted against them.
    limits: { perMinute: row.perMinute, perDay: row.perDay },
    tenant: { timezone: row.timezone, defaultCountry: row.defaultCountry, slotMinutes: row.slotMinutes },
  };
}
