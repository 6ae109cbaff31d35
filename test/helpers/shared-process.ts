// A setup file of every vitest project whose files share their worker's process (vitest.config.ts
// isolate: false): it runs before each file and resets the service's module state that
// test/helpers/module-state.ts (MODULE_STATE) says is reset between files.
import { forgetColumnTypes } from "../../server/db/insert.js";

forgetColumnTypes();
