// A drill's resources (child processes, temporary folders, stand-in servers) and their cleanup:
// every start registers its undo with defer(); close() runs them in reverse order, also on failure
// and when the runner is interrupted (SIGINT/SIGTERM), so nothing outlives the drill.
export type Cleanup = () => Promise<void> | void;

const open = new Set<Scope>();

export class Scope {
  private readonly stack: { what: string; fn: Cleanup }[] = [];
  private closed = false;

  constructor(readonly name: string) {
    open.add(this);
  }

  defer(what: string, fn: Cleanup): void {
    if (this.closed) throw new Error(`scope ${this.name} is closed`);
    this.stack.push({ what, fn });
  }

  async close(): Promise<string[]> {
    this.closed = true;
    open.delete(this);
    const problems: string[] = [];
    while (this.stack.length) {
      const { what, fn } = this.stack.pop()!;
      try {
        await fn();
      } catch (e) {
        problems.push(`cleanup ${what}: ${(e as Error).message}`);
      }
    }
    return problems;
  }
}

/** Closes every open scope (used by the runner's signal handlers). */
export async function closeAllScopes(): Promise<void> {
  for (const s of [...open]) await s.close();
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Rejects when `p` takes longer than `ms`. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((_, rej) => (timer = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
