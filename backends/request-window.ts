/**
 * At most `size` requests outstanding at a time; the others wait their turn in order.
 *
 * For node-zookeeper-client: its socket handler parses one reply and then calls itself for the
 * rest of the bytes read, copying them each time, so a read holding N replies costs N stack
 * frames and O(N²) bytes copied. A 64 KB read of tiny NO_NODE replies holds about 3,300 (about
 * 250 ms of CPU; the stack overflowed at about 5,000 in a test). With the window no read holds
 * more than `size` replies, however many reads the store pipelines (a fetch of 20,000 missing
 * partitions: 3.7–5.3 s with 256, 9.8–14.2 s without).
 */
export class RequestWindow {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private head = 0;

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1)
      throw new Error(`window size must be a positive integer, got ${size}`);
  }

  async run<T>(request: () => Promise<T>): Promise<T> {
    if (this.active >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await request();
    } finally {
      this.release();
    }
  }

  /** Hands the slot to the next waiting request (it stays counted as active), or frees it. */
  private release(): void {
    if (this.head < this.waiting.length) {
      const next = this.waiting[this.head++]!;
      // Drop the consumed prefix now and then instead of shift()ing each time (O(n) per call).
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting.splice(0, this.head);
        this.head = 0;
      }
      next();
    } else {
      this.active--;
    }
  }
}
