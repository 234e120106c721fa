import { afterEach, describe, expect, it, vi } from 'vitest';
import { GroupCommit } from './embedded-group-commit.js';

/** A transaction function whose commits settle only when the test says: a disk that may stall. */
function stallableDisk() {
  const commits: { resolve: () => void; reject: (err: Error) => void }[] = [];
  const transaction = (callback: () => void): Promise<unknown> => {
    callback();
    return new Promise<void>((resolve, reject) => commits.push({ resolve, reject }));
  };
  return { transaction, commits };
}

describe('GroupCommit.committingForMs: how long the write on the disk has waited', () => {
  afterEach(() => vi.useRealTimers());

  it('counts from the bodies run to the commit settling, committed or failed', async () => {
    vi.useFakeTimers();
    const disk = stallableDisk();
    const writes = new GroupCommit(disk.transaction, 1000, () => false, Promise.resolve());
    await Promise.resolve();
    expect(writes.committingForMs()).toBe(0);
    const first = writes.submit('commit', () => 'written');
    expect(disk.commits).toHaveLength(1);
    vi.advanceTimersByTime(8000);
    // The body ran before the deadline: its caller waits for the disk, and the wait shows.
    expect(writes.committingForMs()).toBe(8000);
    disk.commits[0]!.resolve();
    await expect(first).resolves.toBe('written');
    expect(writes.committingForMs()).toBe(0);

    const second = writes.submit('commit', () => 'lost');
    vi.advanceTimersByTime(1500);
    expect(writes.committingForMs()).toBe(1500);
    disk.commits[1]!.reject(new Error('EIO'));
    await expect(second).rejects.toThrow(/EIO/);
    expect(writes.committingForMs()).toBe(0);
  });

  it('counts from the oldest open commit: a later one that settles first does not hide it', async () => {
    vi.useFakeTimers();
    const disk = stallableDisk();
    const writes = new GroupCommit(disk.transaction, 1000, () => false, Promise.resolve());
    await Promise.resolve();
    const stuck = writes.submit('commit', () => 'written');
    vi.advanceTimersByTime(3000);
    // A later transaction (lmdb-js commits one that wrote nothing at once) settles first.
    const later = writes.submit('commit', () => 'later');
    expect(disk.commits).toHaveLength(2);
    vi.advanceTimersByTime(500);
    disk.commits[1]!.resolve();
    await expect(later).resolves.toBe('later');
    expect(writes.committingForMs()).toBe(3500);
    disk.commits[0]!.resolve();
    await expect(stuck).resolves.toBe('written');
    expect(writes.committingForMs()).toBe(0);
  });
});

describe('GroupCommit: a failed commit', () => {
  it('fails every write in it with the cause lmdb-js gives, as explained (the disk full)', async () => {
    const disk = stallableDisk();
    const writes = new GroupCommit(
      disk.transaction,
      1000,
      () => false,
      Promise.resolve(),
      async (why) => `${why} (the disk is full)`,
    );
    await Promise.resolve();
    const a = writes.submit('embedded store: commit', () => 'a');
    const b = writes.submit('embedded store: commit', () => 'b');
    await Promise.resolve();
    // lmdb-js's failed commit: an error whose commitError promise carries the cause.
    const failed = Object.assign(new Error('Commit failed'), {
      commitError: Promise.reject(new Error('Input/output error')),
    });
    for (const c of disk.commits) c.reject(failed);
    for (const w of [a, b])
      await expect(w).rejects.toThrow(
        'embedded store: commit: write transaction failed: Input/output error (the disk is full)',
      );
  });
});
