// Changes as they happen: an internal app that follows the tenant's changes feed through the tRPC
// subscription changes.subscribe (server-sent events; in Node through the `eventsource` package), and
// resumes where it left off when the connection is cut (httpSubscriptionLink reconnects with the last
// event's id, the page's nextSince, as lastEventId).
//
//   CRM_URL=http://127.0.0.1:3000 CRM_API_KEY=crm_… npx tsx examples/internal-app/live.ts [--since now] [--pages N]
//
// It prints one line per change (`<changedAt> <type> <action> <id>`). --since: where to start (`now`,
// the default: what happens next; a nextSince saved earlier; `start`: everything from the beginning).
// --pages N: stop after N pages (a smoke test); without it, Ctrl-C stops it.
import { createTRPCClient, httpSubscriptionLink, TRPCClientError } from "@trpc/client";
import { EventSource } from "eventsource";
import type { AppRouter } from "../../client/trpc.js";

function fail(message: string): never {
  console.error(`live: ${message}`);
  process.exit(2);
}

const baseUrl = (process.env.CRM_URL ?? "http://127.0.0.1:3000").replace(/\/+$/, "");
const apiKey = process.env.CRM_API_KEY ?? fail("set CRM_API_KEY (a new demo key: npm run --silent admin -- demo-key)");
const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : (process.argv[i + 1] ?? fail(`${name} needs a value`));
};
const sinceArg = arg("--since") ?? "now";
const pages = arg("--pages") === undefined ? Number.POSITIVE_INFINITY : Number(arg("--pages"));
if (!(pages >= 1)) fail(`--pages must be a positive number, got "${arg("--pages")}"`);

const crm = createTRPCClient<AppRouter>({
  links: [
    httpSubscriptionLink({
      url: `${baseUrl}/trpc`,
      EventSource,
      // The key on every (re)connection: EventSource itself sends no custom header, its fetch does.
      eventSourceOptions: () => ({
        fetch: (url: string | URL, init?: RequestInit) =>
          fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), "X-API-Key": apiKey } }),
      }),
    }),
  ],
});

let received = 0;
const subscription = crm.changes.subscribe.subscribe(sinceArg === "start" ? {} : { since: sinceArg }, {
  onStarted: () => console.error(`live: following ${baseUrl} (since ${sinceArg})`),
  onData: ({ id, data }) => {
    for (const c of data.items) console.log(`${c.changedAt} ${c.type} ${c.action} ${c.id}`);
    // id is the page's nextSince: saved, it resumes a later run exactly here (--since <id>).
    console.error(`live: at ${id}`);
    if (++received >= pages) {
      subscription.unsubscribe();
      process.exitCode = 0;
    }
  },
  onError: (err) => {
    const env = err instanceof TRPCClientError ? (err.data as { envelope?: { error: string } } | undefined) : undefined;
    console.error(`live: ${env?.envelope?.error ?? "error"}: ${err.message}`);
    process.exitCode = 1;
    subscription.unsubscribe();
  },
  onConnectionStateChange: (s) => {
    if (s.state === "connecting" && s.error) console.error(`live: reconnecting (${s.error.message})`);
  },
});
process.once("SIGINT", () => subscription.unsubscribe());
