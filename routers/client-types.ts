// Router types for internal TypeScript apps (type-only: importing this file loads no server code).
//   createTRPCClient<AppRouter>({ links: [httpLink({ url: ".../trpc", headers: { "X-API-Key": key } })] })
//   createTRPCClient<AdminRouter>({ links: [httpBatchLink({ url: ".../trpc-admin", headers: { Authorization: `Bearer ${token}` } })] })
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server";
import type { AdminRouter } from "./admin/_router.js";
import type { AppRouter } from "./index.js";

export type { AdminRouter, AppRouter };
export type AppInputs = inferRouterInputs<AppRouter>;
export type AppOutputs = inferRouterOutputs<AppRouter>;
export type AdminInputs = inferRouterInputs<AdminRouter>;
export type AdminOutputs = inferRouterOutputs<AdminRouter>;
