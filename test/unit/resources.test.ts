// One list of resources (model/resources.ts): what derives from it stays derived, and the lists that
// stay separate — because they describe something else — still name exactly the resources they must.
import { describe, expect, it } from "vitest";
import { CHANGE_TYPES, RESOURCES, RESOURCE_TABLE, SYNCED_TABLES } from "../../model/resources.js";
import { ALL_SCOPES } from "../../server/auth/scopes.js";
import { LIST_COUNTERS } from "../../routers/_lib/counters.js";
import { EXTERNAL_KEYS } from "../../routers/_lib/sync.js";
import { READ_SCOPE } from "../../routers/changes/schemas.js";
import { appRouter } from "../../routers/index.js";
import { OPERATION_EXAMPLES } from "../../rest/examples.js";
import { operations } from "../../routers/trpc.js";

const tables = RESOURCES.map((r) => RESOURCE_TABLE[r].table).sort();

describe("the resources' registry", () => {
  it("derives the scopes, the feed's types and read scopes, and the external ids' unique indexes", () => {
    expect(ALL_SCOPES).toEqual(RESOURCES.flatMap((r) => [`tenant:${r}.read`, `tenant:${r}.manage`]));
    expect(CHANGE_TYPES).toEqual(["lead", "contact", "conversation", "appointment", "ticket"]);
    expect(Object.values(READ_SCOPE).sort()).toEqual(RESOURCES.map((r) => `tenant:${r}.read`).sort());
    expect(EXTERNAL_KEYS).toEqual({
      Lead: "Lead_tenantId_externalId_key",
      Contact: "Contact_tenantId_externalId_key",
      Ticket: "Ticket_tenantId_externalId_key",
    });
    expect(SYNCED_TABLES.sort()).toEqual(["Contact", "Lead", "Ticket"]);
  });

  // Separate on purpose, each for its reason:
  it("the counter registry (routers/_lib/counters.ts) counts each resource's list: it is keyed by table and says which filters have counters", () => {
    expect(Object.keys(LIST_COUNTERS).sort()).toEqual(tables);
  });

  // Besides the resources: me, availability, changes and the reference lists (stages, users, channels, templates).
  it("the router (routers/index.ts) is written out, so that its type is the client's: a sub-router per resource", () => {
    const top = new Set(operations(appRouter).map((o) => o.path.split(".")[0]!));
    const reference = ["stages", "users", "channels", "templates"];
    expect([...top].sort()).toEqual([...RESOURCES, "availability", "changes", "me", ...reference].sort());
  });

  it("the OpenAPI examples (rest/examples.ts) are per operation, not per resource: each names an operation of the router", () => {
    const routes = new Set(
      operations(appRouter).flatMap(({ meta }) =>
        meta.openapi ? [`${meta.openapi.method} ${meta.openapi.path}`] : [],
      ),
    );
    expect(Object.keys(OPERATION_EXAMPLES).filter((k) => !routes.has(k))).toEqual([]);
  });
});
