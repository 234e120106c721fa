/**
 * Which topics the cluster has, for `--unknown-topics reject`: a metadata cache of topic names and
 * partition counts, refreshed every few seconds through the proxy's cluster client, so that a
 * commit's partitions are checked with one look and a broker that does not answer holds up no
 * commit to a topic the cache has.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ClusterClient } from '../client/cluster-client.js';

/** A topic in the metadata cache: its partition count, and whether the cache is fresh. */
export interface CachedTopic {
  partitions: number;
  fresh: boolean;
}

/**
 * Whether the cached topic has `partition`, when the cache can tell (undefined: ask the broker,
 * TopicCache.topicExists). A partition the cache has is answered whatever the cache's age; one
 * it lacks only by a fresh cache (the topic may have grown since).
 */
export function cachedAnswer(topic: CachedTopic | undefined, partition: number): boolean | undefined {
  if (topic === undefined) return undefined;
  if (partition >= 0 && partition < topic.partitions) return true;
  return topic.fresh ? false : undefined;
}

export class TopicCache {
  private topics: { names: Map<string, number>; at: number } | null = null;
  private refreshing: Promise<void> | null = null;

  constructor(
    private readonly cluster: ClusterClient,
    private readonly topicCacheMs: number,
  ) {}

  /**
   * The topic as the cache knows it, without a request (undefined: not in it), for answering
   * every partition of a commit with one look (cachedAnswer): asked per partition, the look and
   * its promise were a visible share of a 100-partition commit's CPU. An old cache is refreshed
   * in the background, as topicExists does.
   */
  cachedTopic(topic: string): CachedTopic | undefined {
    const cached = this.topics;
    const partitions = cached?.names.get(topic);
    if (!cached || partitions === undefined) return undefined;
    const fresh = Date.now() - cached.at < this.topicCacheMs;
    // A topic the cache knows needs no request, so no deadline: a timer per partition of every
    // commit was most of the CPU of a 100-partition commit.
    if (!fresh) this.refreshInBackground();
    return { partitions, fresh };
  }

  /**
   * Whether topic `topic` has partition `partition`, from metadata cached for a few seconds. A
   * partition the cache has is answered from it whatever its age, and an old cache is refreshed
   * in the background: a broker's coordinator also answers from a metadata cache that learns of
   * deletions later, and a broker that does not answer (stopped, partitioned) then holds up no
   * commit to a topic it had, where waiting for it held every commit for the request timeout.
   * What the cache lacks is asked for, within the request timeout.
   */
  topicExists(topic: string, partition: number): Promise<boolean> {
    const known = cachedAnswer(this.cachedTopic(topic), partition);
    if (known !== undefined) return Promise.resolve(known);
    return this.cluster.within(`looking up topic ${topic}`, async () => {
      const fresh = this.topics && Date.now() - this.topics.at < this.topicCacheMs;
      if (!fresh) await this.refreshTopics();
      let count = this.topics?.names.get(topic);
      if (count === undefined && fresh) {
        // Maybe created since the last refresh.
        await this.refreshTopics();
        count = this.topics?.names.get(topic);
      }
      return count !== undefined && partition >= 0 && partition < count;
    });
  }

  private refreshInBackground(): void {
    if (this.refreshing) return;
    // A failed refresh leaves the old cache: the next commit tries again.
    this.cluster.within('refreshing topic metadata', () => this.refreshTopics()).catch(() => {});
  }

  private refreshTopics(): Promise<void> {
    this.refreshing ??= this.cluster
      .metadata(null)
      .then((md) => {
        const names = new Map<string, number>();
        for (const t of md.topics)
          if (t.name !== null && t.errorCode === ErrorCode.NONE) names.set(t.name, t.partitions.length);
        this.topics = { names, at: Date.now() };
      })
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }
}
