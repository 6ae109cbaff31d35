// The interactive API reference at GET /docs: Swagger UI from the installed `swagger-ui-dist`
// package (no CDN: the page works offline) pointed at /public/v1/openapi.json. No key, not
// rate-limited, outside /public/v1.
//
//   GET /docs              the page (HTML; every URL in it is relative, so it also works behind a
//                          path prefix)
//   GET /docs/             → 301 to the page
//   GET /docs/init.js      the Swagger UI configuration (a file, so the CSP needs no inline script)
//   GET /docs/assets/*     the package's CSS, JS and icons (express.static over its folder, only
//                          the files the page uses and their source maps)
//
// A Content-Security-Policy that allows only this origin backs the "no external request" promise:
// the validator badge (which would call validator.swagger.io) is switched off in the config.
import { createRequire } from "node:module";
import { dirname } from "node:path";
import express, { type RequestHandler } from "express";

export const DOCS_PATH = "/docs";
const ASSETS = "assets";
const SPEC_URL = "public/v1/openapi.json"; // relative to the page at /docs → /public/v1/openapi.json

/** The files of swagger-ui-dist the page loads (plus their .map files). */
const ASSET_FILES = new Set(["swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png", "favicon-16x16.png"]);

/** The folder of the installed swagger-ui-dist package. */
export function swaggerUiDistPath(): string {
  return dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
}

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE = `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>CRM public API v1 — reference</title>
    <link rel="stylesheet" type="text/css" href="docs/${ASSETS}/swagger-ui.css" />
    <link rel="icon" type="image/png" href="docs/${ASSETS}/favicon-32x32.png" sizes="32x32" />
    <link rel="icon" type="image/png" href="docs/${ASSETS}/favicon-16x16.png" sizes="16x16" />
  </head>
  <body>
    <noscript>
      This reference needs JavaScript. The machine-readable document is at <a href="${SPEC_URL}">${SPEC_URL}</a>.
    </noscript>
    <div id="swagger-ui" data-spec-url="${SPEC_URL}"></div>
    <script src="docs/${ASSETS}/swagger-ui-bundle.js" charset="utf-8"></script>
    <script src="docs/init.js" charset="utf-8"></script>
  </body>
</html>
`;

const INIT = `// Swagger UI configuration for /docs.
(function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.getAttribute("data-spec-url"),
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    docExpansion: "list",
    displayRequestDuration: true,
    // No badge: it would send the document to validator.swagger.io.
    validatorUrl: null,
  });
})();
`;

const securityHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader("Content-Security-Policy", CSP);
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Referrer-Policy", "no-referrer");
  next();
};

export function docsPage(): express.Router {
  const r = express.Router({ strict: true });
  r.get(DOCS_PATH, securityHeaders, (_req, res) => {
    res.setHeader("Cache-Control", "no-cache");
    res.type("text/html; charset=utf-8").send(PAGE);
  });
  // Relative Location: /docs/ + ../docs → /docs (also behind a path prefix).
  r.get(`${DOCS_PATH}/`, (_req, res) => res.redirect(301, "../docs"));
  r.get(`${DOCS_PATH}/init.js`, securityHeaders, (_req, res) => {
    res.setHeader("Cache-Control", "no-cache");
    res.type("text/javascript; charset=utf-8").send(INIT);
  });
  r.use(
    `${DOCS_PATH}/${ASSETS}`,
    securityHeaders,
    (req, res, next) => {
      const name = req.path.slice(1);
      if (ASSET_FILES.has(name) || ASSET_FILES.has(name.replace(/\.map$/, ""))) return next();
      res.status(404).type("text/plain").send("Not found");
    },
    express.static(swaggerUiDistPath(), { index: false, redirect: false, maxAge: "1d" }),
    (_req: express.Request, res: express.Response) => res.status(404).type("text/plain").send("Not found"),
  );
  return r;
}
