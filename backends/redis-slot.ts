/**
 * Redis Cluster's key slot: CRC16 (XMODEM) of the key, or of its hash tag (the bytes between the
 * first `{` and the first `}` after it, when not empty), modulo 16384 — as CLUSTER KEYSLOT
 * computes it. The store uses it to know which primary runs a group's commit script.
 */
const SLOTS = 16384;

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let b = 0; b < 8; b++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

export function keySlot(key: string | Buffer): number {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % SLOTS;
  }
  return crc16(bytes) % SLOTS;
}
