/**
 * "RSS flat" (issue 43), judged on a proxy's anonymous memory: what the process allocated itself.
 * VmRSS also counts mapped file pages (the embedded store's LMDB file grows with the data and is
 * paged in as it is read), which say nothing about a leak.
 *
 * A proxy fills its heap and buffers in its first minute under load and stays there; a leak keeps
 * going. So over one incarnation (a restarted proxy starts empty), the median of the last quarter
 * of the samples is held against the largest of the first quarter: a leak shows as growth past it,
 * a warm-up does not.
 */

/** Growth of anonymous memory past the first quarter's peak that fails the run. */
export const ANON_GROWTH_LIMIT_MB = 64;

/**
 * Fewer samples than this (5 s apart: 4 minutes) in every incarnation: too short to judge, since
 * the first quarter must hold the fill-up (the bounded runs of npm test are not judged).
 */
export const MIN_SAMPLES = 48;

export interface MemorySample {
  atS: number;
  /** VmRSS. */
  mb: number;
  /** RssAnon. */
  anonMb: number;
  incarnation: number;
}

export interface AnonGrowth {
  incarnation: number;
  fromS: number;
  toS: number;
  /** The largest in the first quarter of the incarnation's samples. */
  earlyMb: number;
  /** The median of the last quarter. */
  lateMb: number;
  growthMb: number;
}

/** The growth over the incarnation with the most samples; null when none has MIN_SAMPLES. */
export function anonGrowth(samples: readonly MemorySample[]): AnonGrowth | null {
  const byIncarnation = new Map<number, MemorySample[]>();
  for (const s of samples) {
    if (!Number.isFinite(s.anonMb)) continue;
    const list = byIncarnation.get(s.incarnation) ?? [];
    list.push(s);
    byIncarnation.set(s.incarnation, list);
  }
  let longest: MemorySample[] = [];
  for (const list of byIncarnation.values()) if (list.length > longest.length) longest = list;
  if (longest.length < MIN_SAMPLES) return null;
  const quarter = Math.floor(longest.length / 4);
  const earlyMb = Math.max(...longest.slice(0, quarter).map((s) => s.anonMb));
  const late = longest
    .slice(longest.length - quarter)
    .map((s) => s.anonMb)
    .sort((a, b) => a - b);
  const lateMb = late[Math.floor(late.length / 2)]!;
  return {
    incarnation: longest[0]!.incarnation,
    fromS: longest[0]!.atS,
    toS: longest.at(-1)!.atS,
    earlyMb,
    lateMb,
    growthMb: lateMb - earlyMb,
  };
}

/** The verdict's reason when a proxy's memory grew past the limit, else null. */
export function memoryReason(proxy: string, growth: AnonGrowth | null): string | null {
  if (growth === null || growth.growthMb <= ANON_GROWTH_LIMIT_MB) return null;
  return (
    `${proxy}: anonymous memory grew ${growth.growthMb.toFixed(0)} MB (${growth.earlyMb.toFixed(0)} -> ` +
    `${growth.lateMb.toFixed(0)} MB, incarnation ${growth.incarnation}, ${growth.fromS.toFixed(0)}-` +
    `${growth.toS.toFixed(0)} s), more than ${ANON_GROWTH_LIMIT_MB} MB`
  );
}
