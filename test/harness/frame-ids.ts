// The correlation ids of the whole frames in a byte stream, for tests that check what crossed a
// relay and in which order: answers carry theirs first, requests after the api key and version.

function idsAt(bytes: Buffer, at: number): number[] {
  const ids: number[] = [];
  let offset = 0;
  while (offset + 4 + at + 4 <= bytes.length) {
    const size = bytes.readInt32BE(offset);
    if (offset + 4 + size > bytes.length) break;
    ids.push(bytes.readInt32BE(offset + 4 + at));
    offset += 4 + size;
  }
  return ids;
}

/** Correlation ids of the whole answer frames in `bytes`, in order. */
export function answerIds(bytes: Buffer): number[] {
  return idsAt(bytes, 0);
}

/** Correlation ids of the whole request frames in `bytes`, in order. */
export function requestIds(bytes: Buffer): number[] {
  return idsAt(bytes, 4);
}
