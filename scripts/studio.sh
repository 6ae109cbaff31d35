#!/bin/sh
# `npm run studio`: Prisma Studio on DATABASE_URL; without it, on the embedded database through the SQL
# socket of the process that owns the folder (server/admin/studio.ts: the running service's, or its
# own). `exec` twice over (package.json and here): Prisma's CLI (or, embedded, the process that passes
# signals on to it) is npm's direct child, so npm's SIGTERM/SIGINT reach it
# (test/process/process-signals.test.ts).
if [ -z "$DATABASE_URL" ]; then
  exec node --import tsx server/admin/studio.ts "$@"
fi
exec prisma studio "$@"
