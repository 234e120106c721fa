// One request to a proxy's HTTP endpoint (--http or --admin-http), with an optional bearer token
// and JSON body: what the admin API tests send.

export interface HttpAnswer {
  status: number;
  text: string;
}

export async function httpCall(
  port: number,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string } = {},
): Promise<HttpAnswer> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: {
      ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, text: await res.text() };
}
