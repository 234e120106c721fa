/**
 * Topic ids and names, as the cluster's metadata pairs them, for OffsetCommit and OffsetFetch v10
 * (KIP-848: topics named by id). The store keeps offsets by topic name, in every layout, as the
 * broker keeps them in __consumer_offsets: a v10 request's ids are mapped to names on the way in,
 * and names to ids on the way out.
 *
 * The pairs come from a Metadata request for all topics, cached. The cache is replaced whole by
 * each refresh, so it never holds more than the cluster's topics, and an id whose topic was
 * deleted (or deleted and re-created under the same name, with a new id) leaves with the refresh
 * that no longer lists it. An id or name the cache lacks is asked for (a topic created since),
 * but at most once per `missGapMs`: unknown ids sent in a loop do not become a Metadata request
 * each. A known id of an old cache is answered at once and the cache refreshed in the background,
 * so that a broker that does not answer holds up no commit to a topic it had (as
 * BrokerLookups.topicExists).
 */
import { ZERO_UUID } from '../../protocol/generated-support.js';

/** One topic of the cluster: its name and id (base64url, as the codec carries uuids). */
export interface TopicEntry {
  name: string;
  id: string;
}

export interface TopicIdsOptions {
  /** How long a refresh is trusted before the next lookup refreshes it in the background. */
  maxAgeMs?: number;
  /** The shortest time between two refreshes asked for by ids or names the cache lacks. */
  missGapMs?: number;
  now?: () => number;
}

interface Snapshot {
  byId: Map<string, string>;
  byName: Map<string, string>;
  at: number;
}

export class TopicIds {
  private snapshot: Snapshot | null = null;
  private refreshing: Promise<Snapshot> | null = null;
  private readonly maxAgeMs: number;
  private readonly missGapMs: number;
  private readonly now: () => number;

  /** `list` asks the cluster for all its topics (Metadata v10+ carries their ids). */
  constructor(
    private readonly list: () => Promise<readonly TopicEntry[]>,
    opts: TopicIdsOptions = {},
  ) {
    this.maxAgeMs = opts.maxAgeMs ?? 10_000;
    this.missGapMs = opts.missGapMs ?? 500;
    this.now = opts.now ?? Date.now;
  }

  /**
   * The names of `ids` the cluster has; ids it does not have (unknown, or of a deleted topic) are
   * left out. Rejects only when the cache lacks an id and the cluster cannot be asked.
   */
  async namesOf(ids: readonly string[]): Promise<Map<string, string>> {
    const snap = await this.covering(ids, (s, id) => s.byId.has(id));
    return pick(snap.byId, ids);
  }

  /** The ids of `names` the cluster has, as namesOf the other way. */
  async idsOf(names: readonly string[]): Promise<Map<string, string>> {
    const snap = await this.covering(names, (s, name) => s.byName.has(name));
    return pick(snap.byName, names);
  }

  /** A snapshot with every key in it if the cluster has it, refreshing as the class comment says. */
  private async covering(
    keys: readonly string[],
    has: (s: Snapshot, key: string) => boolean,
  ): Promise<Snapshot> {
    let snap = this.snapshot;
    if (snap === null) return this.refresh();
    const age = this.now() - snap.at;
    if (keys.some((k) => !has(snap!, k)) && age >= this.missGapMs) {
      snap = await this.refresh();
    } else if (age >= this.maxAgeMs) {
      // A failed refresh leaves the old cache: the next lookup tries again.
      this.refresh().catch(() => {});
    }
    return snap;
  }

  private refresh(): Promise<Snapshot> {
    this.refreshing ??= this.list()
      .then((topics) => {
        const byId = new Map<string, string>();
        const byName = new Map<string, string>();
        for (const t of topics) {
          if (t.id === ZERO_UUID) continue; // a broker without topic ids (before Metadata v10)
          byId.set(t.id, t.name);
          byName.set(t.name, t.id);
        }
        this.snapshot = { byId, byName, at: this.now() };
        return this.snapshot;
      })
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }
}

function pick(from: Map<string, string>, keys: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const k of keys) {
    const v = from.get(k);
    if (v !== undefined) out.set(k, v);
  }
  return out;
}
