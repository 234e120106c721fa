// The bed's broker behind a RequestTap: the tap listens where the broker's TAPPED listener is
// advertised (global-setup.ts), so clients that bootstrap at the tap stay on it and every request
// of theirs passes it. An external cluster (KOP_BOOTSTRAP) has no such listener: then a broker of
// the bed's own is started with one, and the caller uses it for everything.
import { startKafka, type KafkaCluster } from '../bed/kafka.js';
import { freePortWithCompanion } from '../bed/ports.js';
import { RequestTap } from './request-tap.js';

export interface TappedBroker {
  /** The broker itself, untapped (the bed's, or the one started here). */
  bootstrap: string;
  /** Where clients bootstrap to pass the tap. */
  tappedBootstrap: string;
  /** The port of `tappedBootstrap`. */
  tappedPort: number;
  tap: RequestTap;
  /** The broker started here (with an external cluster), whose classpath the caller then uses. */
  ownBroker: KafkaCluster | undefined;
  stop(): Promise<void>;
}

/** `bedBootstrap` and `tapped`: the bed's broker and its TAPPED listener (inject('kafkaTappedListener')). */
export async function tappedBroker(
  bedBootstrap: string,
  tapped: { port: number; advertisedPort: number } | null,
): Promise<TappedBroker> {
  let ownBroker: KafkaCluster | undefined;
  let listener = tapped;
  if (listener === null) {
    const port = await freePortWithCompanion(1);
    listener = { port, advertisedPort: port + 1 };
    ownBroker = await startKafka({ extraListeners: [{ name: 'TAPPED', ...listener }] });
  }
  const tap = new RequestTap();
  await tap.listen(
    { host: '127.0.0.1', port: listener.advertisedPort },
    { host: '127.0.0.1', port: listener.port },
  );
  return {
    bootstrap: ownBroker?.bootstrap ?? bedBootstrap,
    tappedBootstrap: `127.0.0.1:${listener.advertisedPort}`,
    tappedPort: listener.advertisedPort,
    tap,
    ownBroker,
    stop: async () => {
      await tap.close();
      await ownBroker?.stop();
    },
  };
}
