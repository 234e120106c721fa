/**
 * Progress of a long offsets command on stderr, shown only once the work has taken more than
 * SHOW_AFTER_MS (short runs stay quiet): on a terminal a bar redrawn in place, otherwise a line
 * with the counts every LINE_EVERY_MS (log files get a few lines, not one per group).
 */
export const SHOW_AFTER_MS = 1000;
const REDRAW_EVERY_MS = 100;
const LINE_EVERY_MS = 2000;
const BAR_WIDTH = 30;

export interface ProgressStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

export class Progress {
  private readonly started: number;
  private lastShown = -Infinity;
  private drawn = false;

  constructor(
    /** What is counted, e.g. "exported groups". */
    private readonly what: string,
    private readonly stream: ProgressStream = process.stderr,
    private readonly now: () => number = Date.now,
  ) {
    this.started = now();
  }

  update(done: number, total: number): void {
    const t = this.now();
    if (t - this.started < SHOW_AFTER_MS) return;
    const tty = this.stream.isTTY === true;
    if (t - this.lastShown < (tty ? REDRAW_EVERY_MS : LINE_EVERY_MS) && done < total) return;
    this.lastShown = t;
    const share = total > 0 ? Math.min(1, done / total) : 1;
    const counts = `${done}/${total} ${this.what} (${Math.floor(share * 100)}%)`;
    if (tty) {
      const full = Math.round(share * BAR_WIDTH);
      this.stream.write(`\r[${'#'.repeat(full)}${' '.repeat(BAR_WIDTH - full)}] ${counts}\x1b[K`);
      this.drawn = true;
    } else {
      this.stream.write(`${counts}\n`);
    }
  }

  /** Ends the bar's line (the command then prints its summary). */
  end(): void {
    if (this.drawn) this.stream.write('\r\x1b[K');
    this.drawn = false;
  }
}
