// Writes the OpenAPI document to openapi.json; with --check, fails when the committed file is stale.
import { readFileSync, writeFileSync } from "node:fs";
import { appRouter } from "../routers/index.js";
import { buildOpenApiDocument } from "../rest/openapi.js";

const text = `${JSON.stringify(buildOpenApiDocument(appRouter), null, 2)}\n`;
if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync("openapi.json", "utf8");
  } catch {}
  if (current !== text) {
    process.stderr.write("openapi.json is stale: run `npm run openapi` and commit it\n");
    process.exit(1);
  }
  process.stdout.write("openapi.json is up to date\n");
} else {
  writeFileSync("openapi.json", text);
  process.stdout.write("wrote openapi.json\n");
}
