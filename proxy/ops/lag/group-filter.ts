/**
 * Which groups get lag series: include/exclude patterns (names or `*` wildcards) and a maximum,
 * so a store with thousands of groups cannot blow up the metric cardinality.
 */
import { globToRegExp } from '../../common/glob.js';

export interface GroupFilterOptions {
  /** Empty: every group. */
  include: readonly string[];
  /** Wins over include. */
  exclude: readonly string[];
  maxGroups: number;
}

export interface GroupSelection {
  selected: string[];
  /** Groups that matched the patterns but were cut by maxGroups. */
  truncated: number;
}

export class GroupFilter {
  private readonly include: RegExp[];
  private readonly exclude: RegExp[];

  constructor(private readonly opts: GroupFilterOptions) {
    this.include = opts.include.map(globToRegExp);
    this.exclude = opts.exclude.map(globToRegExp);
  }

  matches(group: string): boolean {
    if (this.exclude.some((re) => re.test(group))) return false;
    return this.include.length === 0 || this.include.some((re) => re.test(group));
  }

  /** The matching groups, sorted by name (so the cut by maxGroups is stable between refreshes). */
  select(groups: readonly string[]): GroupSelection {
    const matching = groups.filter((g) => this.matches(g)).sort();
    const selected = matching.slice(0, this.opts.maxGroups);
    return { selected, truncated: matching.length - selected.length };
  }
}
