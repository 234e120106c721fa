// A ZooKeeper ensemble that a test can split by the network. On one host the members reach each
// other directly, so nothing sits between them to cut: here every member reaches each peer's
// quorum port and election port through a FaultRelay of its own (one per directed pair and port,
// 12 for 3 members), named in that member's own server.N lines (test/bed/zookeeper.ts,
// `peerAddress`). Clients still reach every member's client port directly: a split separates the
// members, not the proxy from them.
//
// A cut is silent, as a partition is: the links' open connections stop forwarding in both
// directions (held, not reset), so the members notice only through their tick-based timeouts
// (syncLimit); new connections across the cut are refused, so a member's reconnect attempts fail
// instead of leaving a peer's election listener waiting on a half-open handshake. heal() forwards
// what was held on connections both ends still have open (TCP would deliver it too) and lets new
// connections through.
import { startZooKeeperEnsemble } from '../bed/zookeeper.js';
import type { EnsembleMember, EnsembleOptions, ZooKeeperEnsemble } from '../bed/zookeeper.js';
import { FaultRelay } from './fault-relay.js';

export interface SplittableEnsemble extends ZooKeeperEnsemble {
  /**
   * Cuts every link between a member of `side` and a member outside it, both directions; returns
   * the split as text ("{1} | {2,3}"). Cuts of earlier calls stay until heal().
   */
  cut(side: EnsembleMember[]): string;
  /** Every link forwards again. */
  heal(): void;
  /** Links (directed member pairs) cut now. */
  readonly cutLinks: number;
}

interface Link {
  from: number;
  to: number;
  relays: FaultRelay[];
  cut: boolean;
}

export async function startSplittableEnsemble(
  opts: Omit<EnsembleOptions, 'peerAddress'> = {},
): Promise<SplittableEnsemble> {
  const links: Link[] = [];
  let zk: ZooKeeperEnsemble;
  try {
    zk = await startZooKeeperEnsemble({
      ...opts,
      peerAddress: async (from, to, ports) => {
        const [quorum, election] = await Promise.all(
          [ports.quorum, ports.election].map((port) => FaultRelay.start({ host: '127.0.0.1', port })),
        );
        links.push({ from, to, relays: [quorum!, election!], cut: false });
        return { quorum: quorum!.port, election: election!.port };
      },
    });
  } catch (err) {
    await Promise.all(links.flatMap((l) => l.relays.map((r) => r.close())));
    throw err;
  }
  const setCut = (link: Link, cut: boolean) => {
    link.cut = cut;
    for (const relay of link.relays) {
      relay.refusing = cut;
      if (cut) relay.freeze();
      else relay.thaw();
    }
  };
  return {
    ...zk,
    cut(side) {
      const inside = new Set(side.map((m) => m.id));
      for (const link of links) if (inside.has(link.from) !== inside.has(link.to)) setCut(link, true);
      const ids = (f: (m: EnsembleMember) => boolean) =>
        `{${zk.members
          .filter(f)
          .map((m) => m.id)
          .join(',')}}`;
      return `${ids((m) => inside.has(m.id))} | ${ids((m) => !inside.has(m.id))}`;
    },
    heal() {
      for (const link of links) if (link.cut) setCut(link, false);
    },
    get cutLinks() {
      return links.filter((l) => l.cut).length;
    },
    stop: async () => {
      for (const link of links) if (link.cut) setCut(link, false);
      await zk.stop();
      await Promise.all(links.flatMap((l) => l.relays.map((r) => r.close())));
    },
  };
}
