/**
 * After a successful SaslHandshake v0, Kafka's legacy SASL exchange sends raw tokens: each is
 * size-prefixed like a frame but carries no Kafka request header, and each client token gets
 * exactly one server token back. Parsing those as requests is the "api key -19711 is invalid"
 * bug other proxies have. The proxy forwards them opaquely for the number of round trips the
 * mechanism takes, then goes back to reading Kafka requests.
 */
const ROUND_TRIPS: Record<string, number> = {
  PLAIN: 1,
  'SCRAM-SHA-256': 2,
  'SCRAM-SHA-512': 2,
  OAUTHBEARER: 1,
};

/** The number of raw token round trips of `mechanism`, or undefined when it is not known up front. */
export function legacySaslRoundTrips(mechanism: string): number | undefined {
  return ROUND_TRIPS[mechanism.toUpperCase()];
}
