import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectEnvelope, startApp, type TestApp } from "./helpers/app.js";
import { fixture, tenant } from "./helpers/fixtures.js";

let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startApp();
  const ids = await app.load(fixture(tenant("acme")));
  key = ids.tenants.acme!.apiKeys.full!.key;
});
afterAll(() => app.close());

describe("smoke", () => {
  it("GET /me", async () => {
    const r = await app.request("GET", "/public/v1/me", { key });
    expect(r.status).toBe(200);
    expect(r.body.rateLimit.perMinute).toBe(180);
  });
  it("401", async () => {
    expectEnvelope(await app.request("GET", "/public/v1/me"), 401, "INVALID_CREDENTIALS");
  });
});
