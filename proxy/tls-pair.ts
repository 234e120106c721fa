/**
 * Which of a TLS certificate and its key OpenSSL refuses, found by building the context a part at
 * a time: the error's own text and codes do not say which file it came from (a key that is not
 * PEM and a certificate that is not PEM can both be ERR_OSSL_UNSUPPORTED). A CA file is not
 * tried: Node's loader passes over CA entries it cannot read instead of refusing them.
 */
import tls from 'node:tls';

/** `pair`: each loads alone, but the key is not the certificate's. */
export type TlsPart = 'cert' | 'key' | 'pair';

/** The first part createSecureContext refuses, with its error; null when it takes them. */
export function refusedTlsPart(cert?: Buffer, key?: Buffer): { part: TlsPart; error: Error } | null {
  const stages: [TlsPart, tls.SecureContextOptions | null][] = [
    ['cert', cert ? { cert } : null],
    ['key', key ? { key } : null],
    ['pair', cert && key ? { cert, key } : null],
  ];
  for (const [part, options] of stages) {
    if (options === null) continue;
    try {
      tls.createSecureContext(options);
    } catch (err) {
      return { part, error: err instanceof Error ? err : new Error(String(err)) };
    }
  }
  return null;
}
