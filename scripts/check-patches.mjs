// postinstall, before patch-package: every patch under patches/ is for exactly the installed version of
// its package (the name is patch-package's: <name with + for />+<version>.patch). A drift — an upgrade,
// or a range in package.json that resolved to another version — fails the install with one line naming
// the patch and both versions, instead of a patch that applies to the wrong code or does not apply.
// How to drop each patch: docs/decisions/performance.md ("Patched dependencies").
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
let failed = false;
for (const file of readdirSync(path.join(root, "patches"))
  .filter((f) => f.endsWith(".patch"))
  .sort()) {
  const m = /^(.+)\+(\d[^+]*)\.patch$/.exec(file);
  if (!m) {
    console.error(`patches/${file}: not a patch-package file name (<package>+<version>.patch)`);
    failed = true;
    continue;
  }
  const name = m[1].replace(/\+/g, "/");
  const wanted = m[2];
  let installed;
  try {
    installed = JSON.parse(readFileSync(path.join(root, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    installed = "none";
  }
  const pinned = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
  const declared = pinned.dependencies?.[name] ?? pinned.devDependencies?.[name];
  if (installed !== wanted) {
    console.error(
      `patches/${file} is for ${name}@${wanted} but ${name}@${installed} is installed: pin ${name} to ` +
        `${wanted} in package.json, or redo the patch for ${installed} (docs/decisions/performance.md)`,
    );
    failed = true;
  } else if (declared !== wanted) {
    console.error(
      `patches/${file} is for ${name}@${wanted} but package.json asks for ${name}@${declared}: pin it exactly ` +
        `("${wanted}")`,
    );
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
