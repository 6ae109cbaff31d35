#!/bin/sh
# `npm run studio`: Prisma Studio on DATABASE_URL. Without it, one line and exit 1 (Prisma's config
# would otherwise open the `postgres` database of a local server and show an empty page). `exec`
# twice over (package.json and here): Prisma's CLI is npm's direct child, so npm's SIGTERM/SIGINT
# reach it (test/process/process-signals.test.ts).
if [ -z "$DATABASE_URL" ]; then
  echo "Prisma Studio needs a PostgreSQL server: set DATABASE_URL (it cannot open the embedded database in .data/)" >&2
  exit 1
fi
exec prisma studio "$@"
