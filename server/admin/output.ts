// Output of the operator's commands (the admin CLI, db:distribute): a process that exits right after a
// large write to a pipe loses what the pipe had not taken yet (64 KiB), so each command writes through
// this and exits once it resolves.

/** Writes `text` and resolves once it has been handed to the OS (all of it, whatever the stream is). */
export function writeFully(stream: NodeJS.WritableStream, text: string): Promise<void> {
  return new Promise((resolve) => {
    stream.once("error", () => resolve()); // the reader went away (EPIPE): nothing more to write
    stream.write(text, () => resolve());
  });
}
