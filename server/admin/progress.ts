// The progress of a long fixture load on a terminal (`npm run --silent admin -- load FILE`): a million
// leads take about a minute, silent otherwise. Once the load has run PROGRESS_AFTER_MS, one line on
// standard error, rewritten in place at most once per PROGRESS_EVERY_MS, says how many rows are in
// and at what rate; the load's end finishes it with a newline. Only on a terminal: standard error
// that is a file or a pipe (a script, CI, the tests) gets nothing extra, and standard output keeps
// its one JSON document either way.

/** A load running this long (ms) starts showing its progress. */
export const PROGRESS_AFTER_MS = 3_000;
/** The progress line is rewritten at most this often (ms). */
export const PROGRESS_EVERY_MS = 1_000;

/** Told of the rows as each batched statement has written them (server/admin/fixture/load.ts). */
export type RowsWritten = (table: string, rows: number) => void;

export interface LoadProgress {
  rows: RowsWritten;
  /** The load is over (done or failed): ends the line if one was shown. */
  end(): void;
}

/** What the progress writes to: standard error (a TTY stream has `isTTY`). */
export interface ProgressStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

/** "1,234,567" */
const count = (n: number) => Math.round(n).toLocaleString("en-US");

/**
 * The progress of a load on `stream`, or undefined when `stream` is not a terminal (nothing to show).
 * `now`: the clock in ms (injected by tests).
 */
export function loadProgress(
  stream: ProgressStream,
  now: () => number = () => performance.now(),
): LoadProgress | undefined {
  if (!stream.isTTY) return undefined;
  const started = now();
  let total = 0;
  let shownAt: number | undefined;
  const line = (at: number) => {
    const secs = (at - started) / 1000;
    const rate = secs > 0 ? total / secs : 0;
    return `load: ${count(total)} rows in ${secs.toFixed(0)} s (${count(rate)} rows/s)`;
  };
  return {
    rows(_table, rows) {
      total += rows;
      const at = now();
      if (at - started < PROGRESS_AFTER_MS || (shownAt !== undefined && at - shownAt < PROGRESS_EVERY_MS)) return;
      shownAt = at;
      stream.write(`\r\x1b[2K${line(at)}`); // back to the line's start, the old text cleared
    },
    end() {
      if (shownAt !== undefined) stream.write(`\r\x1b[2K${line(now())}\n`);
    },
  };
}
