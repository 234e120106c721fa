// The text the Kafka Streams word-count tests count (clients-streams*.test.ts), with its expected
// counts: fixed, so a run directly and one through the proxy count the same words.

export interface WordCountText {
  lines: string[];
  /** Each word's count, lower case, as the app counts them. */
  counts: Record<string, number>;
  words: number;
}

/** 2,000 lines of 1-9 words from a small vocabulary, with capitals and punctuation. */
export function wordCountText(): WordCountText {
  const vocabulary = (
    'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november ' +
    'oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu kafka proxy ' +
    'offset stream group commit fence broker topic partition record lag epoch task'
  ).split(' ');
  const lines: string[] = [];
  const counts: Record<string, number> = {};
  let words = 0;
  for (let i = 0; i < 2000; i++) {
    const line: string[] = [];
    for (let j = 0; j < 1 + (i % 9); j++) {
      const word = vocabulary[(i * 31 + j * 17) % vocabulary.length]!;
      counts[word] = (counts[word] ?? 0) + 1;
      words++;
      line.push(j === 0 ? word[0]!.toUpperCase() + word.slice(1) : word);
    }
    lines.push(`${line.join(i % 4 === 0 ? ', ' : ' ')}.`);
  }
  return { lines, counts, words };
}
