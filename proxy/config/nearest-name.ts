/**
 * The valid name closest to a misspelt one, for "did you mean ...?" hints on unknown flags, YAML
 * keys and KOP_* variables. Edit distance (insertions, deletions, substitutions, and swaps of two
 * neighbours, the commonest typos); no hint when the closest name is still far off, since a wrong
 * suggestion misleads more than none.
 */
export function nearestName(given: string, names: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const name of names) {
    const d = editDistance(given.toLowerCase(), name.toLowerCase());
    if (d < bestDistance) {
      best = name;
      bestDistance = d;
    }
  }
  // At most a third of the name wrong (at least 2 edits allowed): TOKN, TOKEN_, HTTP_TOEKN.
  return bestDistance <= Math.max(2, Math.floor(given.length / 3)) ? best : undefined;
}

/** Optimal string alignment distance: Levenshtein plus transposition of adjacent characters. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push([i]);
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        rows[0]!.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]!.push(d);
    }
  }
  return rows[a.length]![b.length]!;
}
