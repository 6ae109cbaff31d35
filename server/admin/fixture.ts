// The fixture loader of `admin load` (shared/contracts/operations.md): its public face. The parts
// are in fixture/: format.ts (the document's schema), load.ts (the transaction and the order of the
// steps), one file per kind of row (tenant, users and keys, stages, channels and templates, contacts
// and lists, conversations, leads, appointments, tickets), context.ts (what the steps share).
export { Fixture, type FixtureInput } from "./fixture/format.js";
export { FixtureError, type LoadResult, type TenantIds } from "./fixture/context.js";
export { loadFixture } from "./fixture/load.js";
export { preview } from "./fixture/conversations.js";
