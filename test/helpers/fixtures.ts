// Fixture builders for tests: a full tenant in the contract's fixture format.
import type { FixtureInput } from "../../server/admin/fixture.js";

type TenantInput = FixtureInput["tenants"][number];

/** A Pro tenant with two users, stages, a full-scope key and a read-only key, channels and a template. */
export function tenant(ref: string, extra: Partial<TenantInput> = {}): TenantInput {
  return {
    ref,
    name: `Tenant ${ref}`,
    plan: "pro",
    timezone: "Europe/Madrid",
    defaultCountry: "ES",
    slotMinutes: 30,
    users: [
      {
        ref: "ana",
        name: "Ana Ruiz",
        email: `ana@${ref}.test`,
        bookable: true,
        assignable: true,
        workingHours: [1, 2, 3, 4, 5].map((weekday) => ({ weekday, start: "09:00", end: "17:00" })),
      },
      { ref: "bob", name: "Bob Lee", email: `bob@${ref}.test`, bookable: false, assignable: false },
    ],
    stages: [
      { ref: "new", name: "New", defaultEntry: true },
      { ref: "won", name: "Won" },
    ],
    apiKeys: [
      { ref: "full", owner: "ana", scopes: "all" },
      { ref: "bobkey", owner: "bob", scopes: "all" },
      { ref: "none", owner: "ana", scopes: [] },
    ],
    channels: [
      {
        ref: "wa",
        kind: "whatsapp",
        name: "WhatsApp",
        config: { baseUrl: "http://127.0.0.1:9", phoneNumberId: "1001", accessToken: "t0k" },
      },
      { ref: "site", kind: "web", name: "Website chat" },
    ],
    templates: [
      {
        ref: "hello",
        channel: "wa",
        name: "welcome",
        language: "en",
        body: "Hello {{1}}, this is {{2}}",
        approved: true,
      },
    ],
    ...extra,
  };
}

export function fixture(...tenants: TenantInput[]): FixtureInput {
  return { tenants };
}
