// The work an instance does besides answering requests, the same for `npm start` and the in-process
// core (server/core.ts): the changes feed's sequencer every second (a poll places its own tenant's
// changes itself; this keeps the backlog small), the hourly purges of expired Idempotency-Key
// records and change tombstones, and every 15 s the sweep that marks abandoned deliveries failed
// (a send whose request died after storing its message, older than the provider timeout + 10 s).
// A failure (the database away) is logged once, and so is the recovery. Timers are unref'd.
import { purgeTombstones, sequencePending } from "./changes.js";
import { failAbandonedDeliveries } from "./channels/messages.js";
import { purgeExpiredIdempotencyRecords } from "./idempotency.js";
import type { Services } from "./services.js";

export interface Background {
  stop(): void;
}

export function startBackground(services: Services): Background {
  const { logger, config } = services;
  const timers: NodeJS.Timeout[] = [];
  const every = (ms: number, run: () => unknown, now = false) => {
    if (now) void run();
    const t = setInterval(run, ms);
    t.unref();
    timers.push(t);
  };

  every(3_600_000, () =>
    purgeExpiredIdempotencyRecords(services.db).catch((err) =>
      logger.warn({ err: err.message }, "idempotency purge failed"),
    ),
  );

  const abandonedAfterMs = config.providerTimeoutMs + 10_000;
  every(
    15_000,
    () =>
      failAbandonedDeliveries(services.db.prisma, abandonedAfterMs)
        .then((n) => n && logger.warn({ messages: n }, "abandoned deliveries marked failed"))
        .catch((err) => logger.warn({ err: err.message }, "abandoned-delivery sweep failed")),
    true,
  );

  // One step at a time per instance; instances serialise on the sequencer's advisory lock.
  let sequencing = false;
  let failing = false;
  every(1_000, () => {
    if (sequencing) return;
    sequencing = true;
    sequencePending(services.db.prisma)
      .then(() => {
        if (failing) logger.info("changes sequencer recovered");
        failing = false;
      })
      .catch((err) => {
        if (!failing) logger.warn({ err: err.message }, "changes sequencer failed (retrying every second)");
        failing = true;
      })
      .finally(() => (sequencing = false));
  });

  every(
    3_600_000,
    () =>
      purgeTombstones(services.db.prisma, services.now())
        .then((n) => n && logger.info({ tombstones: n }, "expired change tombstones purged"))
        .catch((err) => logger.warn({ err: err.message }, "change tombstone purge failed")),
    true,
  );

  return { stop: () => timers.forEach(clearInterval) };
}
