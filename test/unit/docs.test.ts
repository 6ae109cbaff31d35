// The interactive reference at GET /docs: Swagger UI served from the installed swagger-ui-dist
// package (no CDN), pointed at /public/v1/openapi.json; no key, not rate-limited.
// (a) plain HTTP: the page, its assets and content types, only relative URLs;
// (b) headless Chromium (skipped when /usr/bin/chromium is missing; CI installs it): the page
//     renders every operation and makes no request outside 127.0.0.1; and "Try it out" as a person
//     does it: Authorize with the demo tenant's key, then on every POST "Try it out"
//     and "Execute" with what the page pre-fills (the document's examples, rest/examples.ts) — each
//     create answers its 201, each batch upsert its 200 — and an error status shows its own code in
//     its example.
import { existsSync, statSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium, type Browser } from "playwright-core";
import { appRouter } from "../../routers/index.js";
import { buildOpenApiDocument } from "../../rest/openapi.js";
import { demoFixture } from "../../server/admin/demo.js";
import { startApp, type TestApp } from "../helpers/app.js";

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = "/tmp/docs.png";

let app: TestApp;
/** The demo tenant's key: the database holds the demo as the first `npm start` loads it (its fixed ids). */
let demoKey: string;
beforeAll(async () => {
  app = await startApp();
  demoKey = (await app.load(demoFixture(new Date(), { fixedIds: true }))).tenants.demo!.apiKeys.demo!.key;
}, 120_000);
afterAll(() => app?.close());

const get = (path: string, headers: Record<string, string> = {}) =>
  fetch(app.url + path, { headers, redirect: "manual" });

/** Every src/href value of an HTML page. */
const urlsOf = (html: string) => [...html.matchAll(/\b(?:src|href)\s*=\s*"([^"]*)"/gi)].map((m) => m[1]!);

/**
 * The document's operations as "METHOD path", their summaries, success statuses, and Swagger UI's element id for each.
 */
function documentOperations() {
  const doc = JSON.parse(JSON.stringify(buildOpenApiDocument(appRouter)));
  const ops: { key: string; method: string; summary: string; success: string; blockId: string }[] = [];
  for (const [path, item] of Object.entries<
    Record<string, { summary: string; tags: string[]; operationId: string; responses: object }>
  >(doc.paths))
    for (const [method, op] of Object.entries(item))
      ops.push({
        key: `${method.toUpperCase()} ${path}`,
        method,
        summary: op.summary,
        success: Object.keys(op.responses).find((s) => s.startsWith("2"))!,
        blockId: `operations-${op.tags[0]}-${op.operationId}`,
      });
  return ops;
}

const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

describe("GET /docs (HTTP)", () => {
  it("returns the HTML page without a key, outside the rate limiter", async () => {
    const res = await get("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.headers.get("x-ratelimit-limit")).toBeNull();
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    const html = await res.text();
    expect(html).toContain('id="swagger-ui"');
    expect(html).toContain("public/v1/openapi.json");
    // Many requests in a row: never 429 (not rate-limited).
    const statuses = await Promise.all(Array.from({ length: 80 }, () => get("/docs").then((r) => r.status)));
    expect(new Set(statuses)).toEqual(new Set([200]));
  });

  it("references only relative URLs: no http(s), no protocol-relative, no CDN", async () => {
    const html = await (await get("/docs")).text();
    expect(html).not.toMatch(/https?:\/\//i);
    const urls = urlsOf(html);
    expect(urls.length).toBeGreaterThanOrEqual(4);
    for (const u of urls) {
      expect(u, u).not.toMatch(/^[a-z][a-z0-9+.-]*:/i);
      expect(u, u).not.toMatch(/^\/\//);
    }
    expect(urls).toEqual(
      expect.arrayContaining(["docs/assets/swagger-ui.css", "docs/assets/swagger-ui-bundle.js", "docs/init.js"]),
    );
    const init = await (await get("/docs/init.js")).text();
    expect(init).not.toMatch(/https?:\/\//i);
    expect(init).toContain("validatorUrl: null");
  });

  it("every URL the page references answers 200 with the right content type", async () => {
    const html = await (await get("/docs")).text();
    const base = new URL("/docs", app.url);
    const expected: Record<string, RegExp> = {
      css: /^text\/css/,
      js: /^(?:text|application)\/javascript/,
      png: /^image\/png/,
    };
    for (const u of urlsOf(html).filter((x) => !x.startsWith("public/"))) {
      const url = new URL(u, base);
      expect(url.origin).toBe(app.url);
      const res = await fetch(url);
      expect(res.status, u).toBe(200);
      const ext = url.pathname.split(".").pop()!;
      expect(res.headers.get("content-type"), u).toMatch(expected[ext]!);
      expect((await res.arrayBuffer()).byteLength, u).toBeGreaterThan(0);
    }
  });

  it("serves the assets from the installed swagger-ui-dist package", async () => {
    const js = await get("/docs/assets/swagger-ui-bundle.js");
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toMatch(/javascript/);
    const body = await js.text();
    expect(body).toContain("SwaggerUIBundle");
    const pkgDir = (await import("../../rest/docs.js")).swaggerUiDistPath();
    expect(Buffer.byteLength(body)).toBe(statSync(`${pkgDir}/swagger-ui-bundle.js`).size);
    const css = await get("/docs/assets/swagger-ui.css");
    expect(css.status).toBe(200);
    expect(css.headers.get("content-type")).toMatch(/^text\/css/);
    expect(css.headers.get("cache-control")).toMatch(/max-age=\d+/);
  });

  it("only the page's assets are exposed; /docs/ redirects to /docs", async () => {
    // The package's own index.html and initializer point at a public demo document: not served.
    for (const p of [
      "/docs/assets/index.html",
      "/docs/assets/swagger-initializer.js",
      "/docs/assets/package.json",
      "/docs/assets/",
      "/docs/assets/nope.js",
    ])
      expect((await get(p)).status, p).toBe(404);
    const slash = await get("/docs/");
    expect(slash.status).toBe(301);
    expect(new URL(slash.headers.get("location")!, `${app.url}/docs/`).pathname).toBe("/docs");
  });

  it("the document the page loads is served without a key", async () => {
    const res = await get("/public/v1/openapi.json");
    expect(res.status).toBe(200);
    expect(((await res.json()) as { openapi: string }).openapi).toMatch(/^3\.1\./);
  });
});

describe("GET /docs (headless Chromium)", () => {
  let browser: Browser | undefined;
  afterAll(async () => {
    await browser?.close();
  });

  it("renders every operation offline: all requests go to 127.0.0.1", async (ctx) => {
    if (!existsSync(CHROMIUM)) {
      const why = `headless docs test SKIPPED: ${CHROMIUM} not found (install Debian's chromium: apt-get install -y chromium; .ci/run does)`;
      console.warn(why);
      ctx.skip(why);
    }
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const requested: string[] = [];
    const failed: string[] = [];
    const problems: string[] = [];
    page.on("request", (r) => requested.push(r.url()));
    page.on("requestfailed", (r) => failed.push(`${r.url()} ${r.failure()?.errorText}`));
    page.on("response", (r) => {
      if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
    });
    // CSP violations and script errors show up here.
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(`console: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));

    const ops = documentOperations();
    const res = await page.goto(`${app.url}/docs`, { waitUntil: "load" });
    expect(res?.status()).toBe(200);
    await page.waitForFunction(`document.querySelectorAll(".opblock").length >= ${ops.length}`, undefined, {
      timeout: 20_000,
    });
    await page.waitForLoadState("networkidle");

    // The operations rendered: "METHOD path" of each block, as the document lists them.
    const rendered = await page.$$eval(".opblock", (blocks) =>
      blocks.map((b) => {
        const method = b.querySelector(".opblock-summary-method")?.textContent?.trim() ?? "";
        const path = b.querySelector(".opblock-summary-path")?.getAttribute("data-path") ?? "";
        return `${method.toUpperCase()} ${path}`;
      }),
    );
    expect(rendered.sort()).toEqual(ops.map((o) => o.key).sort());
    const text = (await page.innerText("#swagger-ui")).replace(/\u200b/g, "");
    expect(text).toContain("/public/v1/leads");
    expect(text).toContain("CRM public API");
    for (const o of ops) expect(text, o.key).toContain(o.summary);

    await page.screenshot({ path: SCREENSHOT });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(10_000);

    // Offline: every request went to this server (no CDN, no validator badge, no fonts from afar).
    expect(requested.length).toBeGreaterThan(0);
    const elsewhere = requested.filter((u) => {
      const url = new URL(u);
      if (url.protocol === "data:" || url.protocol === "blob:") return false;
      return url.hostname !== "127.0.0.1" || url.origin !== app.url;
    });
    expect(elsewhere).toEqual([]);
    expect(requested).toContain(`${app.url}/public/v1/openapi.json`);
    expect(requested).toContain(`${app.url}/docs/assets/swagger-ui-bundle.js`);
    expect(failed).toEqual([]);
    expect(problems).toEqual([]);
  }, 90_000);

  it("Try it out with the demo key succeeds on every create, with the values the page pre-fills; error examples show their own codes", async (ctx) => {
    if (!existsSync(CHROMIUM)) {
      const why = `headless docs test SKIPPED: ${CHROMIUM} not found (install Debian's chromium: apt-get install -y chromium; .ci/run does)`;
      console.warn(why);
      ctx.skip(why);
    }
    browser ??= await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const sent: { method: string; url: string; key: string | undefined; status?: number }[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/public/v1/") && !r.url().endsWith("/openapi.json"))
        sent.push({ method: r.method(), url: r.url(), key: r.headers()["x-api-key"] });
    });
    await page.goto(`${app.url}/docs`, { waitUntil: "load" });
    await page.waitForSelector(".opblock");

    // Authorize: the X-API-Key scheme's dialog, as a person fills it.
    await page.click("button.authorize");
    const modal = page.locator(".modal-ux");
    await modal.locator("input").first().fill(demoKey);
    await modal.locator("button.authorize").click();
    await modal.locator("button.btn-done").click();

    // The 7 creates (201) and the 3 batch upserts (200, each item's outcome in the body).
    const creates = documentOperations().filter((o) => o.method === "post");
    expect(creates).toHaveLength(10);
    const statuses: Record<string, string> = {};
    // Generous bounds for each step: on a loaded 2-core machine Chromium can take seconds to render a
    // response (the batch upserts' are large) before the next block is stable enough to click.
    const STEP = { timeout: 60_000 };
    await modal.waitFor({ state: "detached", ...STEP });
    for (const o of creates) {
      const block = page.locator(`#${o.blockId}`);
      await block.locator(".opblock-summary").click(STEP);
      await block.locator("button.try-out__btn").click(STEP);
      // The body the page pre-filled is the document's example, not a sample made from the schema.
      const body = JSON.parse(await block.locator("textarea.body-param__text").inputValue());
      expect(JSON.stringify(body), o.key).not.toMatch(/"string"|2147483647|3fa85f64-5717-4562-b3fc-2c963f66afa6/);
      await block.locator("button.execute").click(STEP);
      const cell = block.locator(".live-responses-table tbody .response-col_status").first();
      await cell.waitFor(STEP);
      statuses[o.key] = (await cell.innerText()).trim();
      await block.locator(".opblock-summary").click(STEP); // collapse again
      // Collapsed, its response gone from the page, before the next block is clicked.
      await block.locator(".opblock-body").waitFor({ state: "detached", ...STEP });
    }
    expect(statuses).toEqual(Object.fromEntries(creates.map((o) => [o.key, o.success])));
    expect(creates.filter((o) => o.success === "201")).toHaveLength(7);
    // Each went out from the page with the key the dialog was given, one request per create.
    expect(sent.map((r) => r.method)).toEqual(creates.map(() => "POST"));
    expect(new Set(sent.map((r) => r.key))).toEqual(new Set([demoKey]));
    // What the page created is stored: the contact of POST /contacts' example can be found.
    const found = await app.request("GET", "/public/v1/contacts", { key: demoKey, query: { search: "Eva Mora" } });
    expect(found.status, found.text).toBe(200);
    expect(found.body.items.map((c: { phone: string }) => c.phone)).toEqual(["+34600000009"]);

    // The error examples the page shows: each status its own code (503 is not VALIDATION_ERROR).
    const leads = page.locator(`#${creates.find((o) => o.key === "POST /public/v1/leads")!.blockId}`);
    await leads.locator(".opblock-summary").click();
    const example = async (code: string) =>
      (await leads.locator(`.responses-table tr.response[data-code="${code}"]`).first().innerText()).replace(
        /\s+/g,
        " ",
      );
    expect(await example("503")).toContain('"error": "SERVICE_UNAVAILABLE"');
    expect(await example("503")).not.toContain("VALIDATION_ERROR");
    expect(await example("404")).toContain('"error": "NOT_FOUND"');
    expect(await example("404")).toContain("Stage not found");
    expect(await example("401")).toContain('"error": "INVALID_CREDENTIALS"');
    await page.close();
  }, 300_000);
});
