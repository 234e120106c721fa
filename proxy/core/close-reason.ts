/**
 * Why a client's connection pair closed: the `reason` of the "connection closed" log line, one
 * closed set. Each reason says whether it is the ordinary end of a connection (logged at debug)
 * or something the operator should see (warn, with the error); the record below makes the
 * compiler ask that of every new reason.
 */
export type CloseReason =
  // The client went away, or the broker did (BrokerLink's losses).
  | 'client closed'
  | 'client ended'
  | 'client error'
  | 'broker closed'
  | 'broker ended'
  | 'broker error'
  | 'no broker connection'
  // The proxy ended it.
  | 'idle'
  | 'proxy shutting down'
  // What the client or the broker sent could not be handled: that pair closes, never the process.
  | 'bad request framing'
  | 'malformed request'
  | 'request handling failed'
  | 'bad response from broker'
  | 'response handling failed'
  // The native relay could not hand the pair back whole (native-relay.ts).
  | 'native relay failed'
  | 'extension failed';

/** A broker connection's end, as BrokerLink reports it. */
export type BrokerLoss = Extract<
  CloseReason,
  'broker closed' | 'broker ended' | 'broker error' | 'no broker connection'
>;

const LOG_LEVEL: Readonly<Record<CloseReason, 'debug' | 'warn'>> = {
  'client closed': 'debug',
  'client ended': 'debug',
  'client error': 'warn',
  'broker closed': 'debug',
  'broker ended': 'debug',
  'broker error': 'warn',
  // Logged as "no broker connection for client" (warn) when it happens.
  'no broker connection': 'debug',
  idle: 'debug',
  'proxy shutting down': 'debug',
  'bad request framing': 'warn',
  'malformed request': 'warn',
  'request handling failed': 'warn',
  'bad response from broker': 'warn',
  'response handling failed': 'warn',
  'native relay failed': 'warn',
  'extension failed': 'warn',
};

/** The level the close of a connection pair for `reason` is logged at. */
export function closeLogLevel(reason: CloseReason): 'debug' | 'warn' {
  return LOG_LEVEL[reason];
}
