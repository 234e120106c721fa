// Reading `node --trace-gc` output: the heap a process holds is what is left after a full
// (mark-compact) GC; RSS also counts garbage not yet collected and pages the allocator keeps.

/** A --trace-gc line of a full GC: "Mark-Compact 157.3 (170.5) -> 120.2 (166.3) MB"; group 1 = heap after. */
export const MARK_COMPACT = /Mark-Compact[^\n]*? -> (\d+(?:\.\d+)?) \(\d+(?:\.\d+)?\) MB/g;

/** The heap in MB after each full GC found in `output`, in order. */
export function heapsAfterFullGc(output: string): number[] {
  return [...output.matchAll(MARK_COMPACT)].map((m) => Number(m[1]));
}
