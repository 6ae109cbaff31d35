// The pg driver's own parameter conversion (pg/lib/utils.js; @types/pg does not declare the module):
// server/db/delegate.ts passes parameters as text exactly as the driver would send them.
declare module "pg/lib/utils.js" {
  const utils: { prepareValue(value: unknown): string | Buffer | null };
  export default utils;
}
