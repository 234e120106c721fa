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

/**
 * One client connection's place in the legacy exchange: a SaslHandshake v0 request names the
 * mechanism, its successful answer starts the raw tokens, and each client token is one raw frame
 * until the mechanism's round trips are done.
 */
export class LegacySaslExchange {
  private mechanism: string | null = null;
  private tokensLeft = 0;

  /** A SaslHandshake v0 request asked for `mechanism`. */
  handshakeRequested(mechanism: string): void {
    this.mechanism = mechanism;
  }

  /**
   * The broker answered the SaslHandshake v0 with `errorCode`: on success the raw tokens follow.
   * Throws for a mechanism whose number of round trips is not known up front (the connection
   * cannot tell its tokens from requests then).
   */
  handshakeAnswered(errorCode: number): void {
    const mechanism = this.mechanism;
    this.mechanism = null;
    if (errorCode !== 0 || mechanism === null) return;
    const trips = legacySaslRoundTrips(mechanism);
    if (trips === undefined) {
      throw new Error(
        `legacy SASL (SaslHandshake v0) with mechanism ${mechanism} is not supported by the proxy`,
      );
    }
    this.tokensLeft = trips;
  }

  /** A handshake is answered or raw tokens are to come: frames are not all Kafka requests. */
  get inExchange(): boolean {
    return this.mechanism !== null || this.tokensLeft > 0;
  }

  /** Whether the client's next frame is a raw token (without counting it). */
  get expectsRawToken(): boolean {
    return this.tokensLeft > 0;
  }

  /** Whether the client's next frame is a raw token rather than a Kafka request (it counts it). */
  takeRawToken(): boolean {
    if (this.tokensLeft === 0) return false;
    this.tokensLeft--;
    return true;
  }
}
