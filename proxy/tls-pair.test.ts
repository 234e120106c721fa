// Which TLS file a refusal is blamed on, decided by loading the files a part at a time (never by
// OpenSSL's words): every case names the option the error must carry.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTestCerts } from '../test/harness/certs.js';
import { ConfigError } from './config/config-error.js';
import { checkTlsFiles } from './startup-checks.js';

const certs = makeTestCerts();
afterAll(() => certs.remove());
const file = (name: string, text: string): string => {
  const f = path.join(certs.dir, name);
  fs.writeFileSync(f, text);
  return f;
};
// PEM-shaped (the PEM check passes), but not DER inside: OpenSSL refuses them.
const garbageCert = file('garbage.crt', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
const garbageKey = file('garbage.key', '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n');

describe('checkTlsFiles blames the file OpenSSL refuses', () => {
  const { clientCert, clientKey, otherClientKey, ca } = certs.files;
  const cases: { title: string; cert: string; key: string; blamed: string | null }[] = [
    { title: 'a certificate and its key', cert: clientCert, key: clientKey, blamed: null },
    { title: 'a certificate that does not load', cert: garbageCert, key: clientKey, blamed: 'cert' },
    { title: 'a key that does not load', cert: clientCert, key: garbageKey, blamed: 'key' },
    { title: 'neither loads: the certificate first', cert: garbageCert, key: garbageKey, blamed: 'cert' },
    { title: "another certificate's key", cert: clientCert, key: otherClientKey, blamed: 'key' },
  ];
  for (const c of cases) {
    for (const side of ['client', 'broker'] as const) {
      it(`${c.title} (${side})`, () => {
        const files = { cert: c.cert, key: c.key, ca };
        const config =
          side === 'client'
            ? { clientTls: { ...files, requireCert: false }, brokerTls: undefined }
            : { clientTls: undefined, brokerTls: { ...files, insecure: false } };
        let blamed: string | null = null;
        try {
          checkTlsFiles(config);
        } catch (err) {
          expect(err).toBeInstanceOf(ConfigError);
          blamed = (err as ConfigError).key;
        }
        expect(blamed).toBe(c.blamed === null ? null : `${side}-tls-${c.blamed}`);
      });
    }
  }
});
