/**
 * SASL for the proxy's own connections to the cluster (its ClusterClient: metadata, coordinators,
 * lag, fallback, mirrored commits, fence checks). Clients' connections are never authenticated by
 * the proxy: their SASL exchange passes through to the broker untouched.
 *
 * SaslHandshake v1 then SaslAuthenticate: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677).
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { KnownApiKey, RequestBody, ResponseBody } from '../../protocol/messages/api-info.js';

export type SaslMechanism = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512';
export const SASL_MECHANISMS: readonly SaslMechanism[] = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'];

export interface SaslCredentials {
  mechanism: SaslMechanism;
  username: string;
  password: string;
}

export class SaslError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SaslError';
  }
}

/** Sends one request on the connection being authenticated and resolves with the decoded body. */
export type SendRequest = <K extends KnownApiKey>(
  apiKey: K,
  apiVersion: number,
  body: RequestBody<K>,
) => Promise<ResponseBody<K>>;

export async function authenticate(send: SendRequest, creds: SaslCredentials): Promise<void> {
  const hs = await send(ApiKey.SaslHandshake, 1, { mechanism: creds.mechanism });
  if (hs.errorCode !== 0) {
    throw new SaslError(
      `the broker does not accept SASL ${creds.mechanism} (it offers ${hs.mechanisms.join(', ')})`,
    );
  }
  const exchange = async (bytes: Buffer): Promise<Buffer> => {
    const r = await send(ApiKey.SaslAuthenticate, 1, { authBytes: bytes });
    if (r.errorCode !== 0)
      throw new SaslError(`SASL ${creds.mechanism} authentication failed: ${r.errorMessage ?? r.errorCode}`);
    return r.authBytes;
  };
  if (creds.mechanism === 'PLAIN') {
    await exchange(Buffer.from(`\u0000${creds.username}\u0000${creds.password}`, 'utf8'));
    return;
  }
  await scram(exchange, creds);
}

const saslName = (s: string): string => s.replace(/=/g, '=3D').replace(/,/g, '=2C');

async function scram(exchange: (bytes: Buffer) => Promise<Buffer>, creds: SaslCredentials): Promise<void> {
  const hash = creds.mechanism === 'SCRAM-SHA-512' ? 'sha512' : 'sha256';
  const keyLength = hash === 'sha512' ? 64 : 32;
  const nonce = randomBytes(24).toString('base64');
  const clientFirstBare = `n=${saslName(creds.username)},r=${nonce}`;
  const serverFirst = (await exchange(Buffer.from(`n,,${clientFirstBare}`))).toString('utf8');
  const attrs = new Map(serverFirst.split(',').map((kv) => [kv.slice(0, 1), kv.slice(2)] as const));
  const serverNonce = attrs.get('r');
  const salt = attrs.get('s');
  const iterations = Number(attrs.get('i'));
  if (!serverNonce?.startsWith(nonce) || !salt || !Number.isInteger(iterations) || iterations < 1) {
    throw new SaslError('SCRAM: malformed server-first message');
  }
  const salted = pbkdf2Sync(
    creds.password.normalize('NFKC'),
    Buffer.from(salt, 'base64'),
    iterations,
    keyLength,
    hash,
  );
  const clientKey = createHmac(hash, salted).update('Client Key').digest();
  const storedKey = createHash(hash).update(clientKey).digest();
  const clientFinalWithoutProof = `c=biws,r=${serverNonce}`;
  const authMessage = `${clientFirstBare},${serverFirst},${clientFinalWithoutProof}`;
  const signature = createHmac(hash, storedKey).update(authMessage).digest();
  const proof = Buffer.alloc(clientKey.length);
  for (let i = 0; i < proof.length; i++) proof[i] = clientKey[i]! ^ signature[i]!;
  const serverFinal = (
    await exchange(Buffer.from(`${clientFinalWithoutProof},p=${proof.toString('base64')}`))
  ).toString('utf8');
  // The server proves it knows the password too.
  const serverKey = createHmac(hash, salted).update('Server Key').digest();
  const expected = createHmac(hash, serverKey).update(authMessage).digest();
  const verifier = /(?:^|,)v=([^,]+)/.exec(serverFinal)?.[1];
  if (!verifier || !timingSafeEqual(Buffer.from(verifier, 'base64'), expected)) {
    throw new SaslError('SCRAM: the server signature does not verify');
  }
}
