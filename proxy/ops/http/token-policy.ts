/**
 * What an admin bearer token (`--http-token`) must be: long enough not to be guessed, and not one
 * of the placeholders that example files ship ("change-me", "demo-token", ...). A token that fails
 * these rules is refused at start (exit 2) rather than protecting offset changes in name only.
 * Pure and free of imports, so the configuration can check a token without loading the HTTP code.
 */

/** Fewer bytes than this are refused: 16 random bytes are out of reach of online guessing. */
export const MIN_TOKEN_BYTES = 16;

/**
 * Words that placeholder tokens are made of. A token that consists only of these words (any case,
 * any separators) and digits is a placeholder, e.g. "change-me-please", "demo-token-123456",
 * "your_secret_token_here".
 */
const PLACEHOLDER_WORDS = [
  'change',
  'me',
  'changeme',
  'demo',
  'token',
  'secret',
  'password',
  'passwd',
  'example',
  'test',
  'testing',
  'admin',
  'default',
  'your',
  'my',
  'here',
  'replace',
  'with',
  'the',
  'random',
  'placeholder',
  'insecure',
  'dummy',
  'sample',
  'please',
  'kop',
  'kafka',
  'offset',
  'proxy',
  'http',
  'api',
  'key',
  'bearer',
  'foo',
  'bar',
  'baz',
  'todo',
  'fixme',
  'letmein',
  'qwerty',
  'abc',
  'xyz',
];
const WORDS = new Set(PLACEHOLDER_WORDS);

/** A random token of 16 or more characters has many distinct characters; "aaaa…", "0101…" do not. */
const MIN_DISTINCT_CHARACTERS = 5;

/** Whether `text` (lower case letters and digits) is placeholder words and digit runs, one word at least. */
function placeholderWords(text: string): boolean {
  // ok[i]: text[0, i) splits into words and digit runs; withWord[i]: one such split has a word.
  const ok: (boolean | undefined)[] = [true];
  const withWord: boolean[] = [false];
  for (let end = 1; end <= text.length; end++) {
    for (let start = 0; start < end; start++) {
      if (!ok[start]) continue;
      const part = text.slice(start, end);
      const isWord = WORDS.has(part);
      if (!isWord && !/^\d+$/.test(part)) continue;
      ok[end] = true;
      withWord[end] = withWord[end] || withWord[start]! || isWord;
    }
  }
  return ok[text.length] === true && withWord[text.length] === true;
}

/**
 * Why `token` is not acceptable as an admin token, or null when it is. The reason never contains
 * the token.
 */
export function tokenProblem(token: string): string | null {
  if (token === '') return 'empty';
  if (!/^[\x21-\x7e]+$/.test(token)) return 'a space, control or non-ASCII character';
  if (Buffer.byteLength(token, 'utf8') < MIN_TOKEN_BYTES)
    return `shorter than ${MIN_TOKEN_BYTES} bytes (generate one, e.g. openssl rand -hex 24)`;
  const letters = token.toLowerCase().replace(/[^a-z0-9]/g, '');
  if (placeholderWords(letters))
    return 'a placeholder, not a secret (generate one, e.g. openssl rand -hex 24)';
  if (new Set(token).size < MIN_DISTINCT_CHARACTERS)
    return `fewer than ${MIN_DISTINCT_CHARACTERS} distinct characters (generate one, e.g. openssl rand -hex 24)`;
  return null;
}
