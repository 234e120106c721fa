// Test certificates made at test time with openssl into a temp dir (no private key is committed):
// a CA, a server certificate for 127.0.0.1/localhost, and a client certificate, all signed by the
// CA, plus a second unrelated CA and a client certificate it signed, to prove verification really
// happens. The server certificate serves the proxy's TLS listener and the bed's TLS brokers alike.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestCerts {
  dir: string;
  /** File paths (for the CLI) ... */
  files: {
    ca: string;
    serverCert: string;
    serverKey: string;
    clientCert: string;
    clientKey: string;
    otherCa: string;
    otherClientCert: string;
    otherClientKey: string;
  };
  /** ... and their contents (for in-process use). */
  ca: Buffer;
  serverCert: Buffer;
  serverKey: Buffer;
  clientCert: Buffer;
  clientKey: Buffer;
  otherCa: Buffer;
  /** A client certificate signed by the unrelated CA: well formed, but trusted by nobody. */
  otherClientCert: Buffer;
  otherClientKey: Buffer;
  remove(): void;
}

export function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function makeTestCerts(): TestCerts {
  if (!hasOpenssl()) throw new Error('openssl is needed to generate the TLS test certificates');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-certs-'));
  const f = (name: string) => path.join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  // EC keys: generated in milliseconds, unlike RSA.
  const key = (name: string) => ssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', f(name));
  const ca = (name: string, cn: string) => {
    key(`${name}.key`);
    ssl(
      'req',
      '-x509',
      '-new',
      '-key',
      f(`${name}.key`),
      '-out',
      f(`${name}.crt`),
      '-days',
      '2',
      '-subj',
      `/CN=${cn}`,
    );
  };
  const leaf = (name: string, cn: string, ext: string, signer = 'ca') => {
    key(`${name}.key`);
    ssl('req', '-new', '-key', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${cn}`);
    fs.writeFileSync(f(`${name}.ext`), ext);
    ssl(
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f(`${signer}.crt`),
      '-CAkey',
      f(`${signer}.key`),
      '-CAcreateserial',
      '-out',
      f(`${name}.crt`),
      '-days',
      '2',
      '-extfile',
      f(`${name}.ext`),
    );
  };
  ca('ca', 'kop-test-ca');
  ca('other-ca', 'kop-unrelated-ca');
  leaf('server', 'localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('client', 'kop-test-client', 'extendedKeyUsage=clientAuth\n');
  leaf('other-client', 'kop-untrusted-client', 'extendedKeyUsage=clientAuth\n', 'other-ca');
  const files = {
    ca: f('ca.crt'),
    serverCert: f('server.crt'),
    serverKey: f('server.key'),
    clientCert: f('client.crt'),
    clientKey: f('client.key'),
    otherCa: f('other-ca.crt'),
    otherClientCert: f('other-client.crt'),
    otherClientKey: f('other-client.key'),
  };
  return {
    dir,
    files,
    ca: fs.readFileSync(files.ca),
    serverCert: fs.readFileSync(files.serverCert),
    serverKey: fs.readFileSync(files.serverKey),
    clientCert: fs.readFileSync(files.clientCert),
    clientKey: fs.readFileSync(files.clientKey),
    otherCa: fs.readFileSync(files.otherCa),
    otherClientCert: fs.readFileSync(files.otherClientCert),
    otherClientKey: fs.readFileSync(files.otherClientKey),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
