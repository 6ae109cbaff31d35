// Router types for internal TypeScript apps (type-only: importing this file loads no server code).
// Apps import client/trpc.d.ts instead: the same types written out by scripts/trpc-types.ts from this
// file (`npm run client:trpc`; CI fails when it is stale), self-contained, so that type-checking an
// app compiles nothing of the service. Inside the checkout (tests) this file is the source.
//   createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: ".../trpc", maxItems: 20, headers: { "X-API-Key": key } })] })
//   createTRPCClient<AdminRouter>({ links: [httpBatchLink({ url: ".../trpc-admin", headers: { Authorization: `Bearer ${token}` } })] })
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server";
import type { AdminRouter } from "./admin/_router.js";
import type { AppRouter } from "./index.js";

export type { AdminRouter, AppRouter };
export type AppInputs = inferRouterInputs<AppRouter>;
export type AppOutputs = inferRouterOutputs<AppRouter>;
export type AdminInputs = inferRouterInputs<AdminRouter>;
export type AdminOutputs = inferRouterOutputs<AdminRouter>;
