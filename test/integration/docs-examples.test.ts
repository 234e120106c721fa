// Every example in README.md, docs/configuration.md and docs/admin.md is run or checked here, so
// the documents say what the program does:
//   ```console   `$ ` lines are run with the built CLI (in a temporary directory, which holds the
//                embedded store), the lines after each must be its output; `# exit N` its exit code
//   ```sh        each kafka-offset-proxy command line is checked as the program checks it
//                (loadConfig, or the offsets command parser); other commands must be known ones
//   ```yaml      loaded as a --config file
//   ```text store-urls      each line is a store URL the proxy accepts
//   ```text <file>          a file the console examples of that document use
//   ```text listen-error    the line the CLI prints for a broker port in use
//   ```text startup-log     a `starting` log line as the text format writes it
// A block of any other kind fails the test.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, test } from 'vitest';
import { parseStoreUrl } from '../../backends/open-store.js';
import { parseOffsetsCommand } from '../../proxy/offsets-command.js';
import { listenFailureLine, startupSummary } from '../../proxy/cli.js';
import { loadConfig } from '../../proxy/config.js';
import { createLogger } from '../../proxy/logger.js';
import { ListenError } from '../../proxy/core/broker-listeners.js';
import { CLI_BIN } from '../harness/cli-process.js';
import { ensureBuilt } from '../harness/proxy.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = ['README.md', 'docs/configuration.md', 'docs/admin.md'];

interface Block {
  lang: string;
  tag: string | undefined;
  body: string;
  line: number;
}

function blocks(doc: string): Block[] {
  const text = fs.readFileSync(path.join(repo, doc), 'utf8');
  const out: Block[] = [];
  const re = /^```([^\n]*)\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const [lang = '', tag] = m[1]!.trim().split(/\s+/);
    out.push({ lang, tag, body: m[2]!, line: text.slice(0, m.index).split('\n').length });
  }
  return out;
}

/**
 * Random-looking letters in the stand-ins for variables and secrets: the proxy refuses admin tokens
 * that are only placeholder words ("placeholder-KOP_HTTP_TOKEN"), as an operator's real one is not.
 */
const STAND_IN = '7f3e9a1c5b';

/** Shell words of one command: quotes, backslashes, and $VAR / ${VAR} as placeholders. */
function words(command: string): string[] {
  const out: string[] = [];
  let word: string | null = null;
  const push = (s: string) => (word = (word ?? '') + s);
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (c === ' ' || c === '\t') {
      if (word !== null) out.push(word);
      word = null;
    } else if (c === "'") {
      const end = command.indexOf("'", i + 1);
      push(command.slice(i + 1, end));
      i = end;
    } else if (c === '"') {
      const end = command.indexOf('"', i + 1);
      push(command.slice(i + 1, end).replace(/\$\{?(\w+)\}?/g, `placeholder-$1-${STAND_IN}`));
      i = end;
    } else if (c === '$') {
      const m = /^\$\{?(\w+)\}?/.exec(command.slice(i))!;
      push(`placeholder-${m[1]}-${STAND_IN}`);
      i += m[0].length - 1;
    } else push(c);
  }
  if (word !== null) out.push(word);
  return out;
}

const OTHER_COMMANDS = ['npm ci', 'npm test', 'bash .ci/run', 'docker compose up --build'];

/** Checks one command line of an sh block; returns what is wrong, or null. */
function checkCommand(command: string): string | null {
  const tokens = words(command);
  const env: NodeJS.ProcessEnv = {};
  while (tokens.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(tokens[0]!)) {
    const [k, ...v] = tokens.shift()!.split('=');
    env[k!] = v.join('=');
  }
  if (tokens[0] === 'npx') tokens.shift();
  if (tokens[0] !== 'kafka-offset-proxy') {
    return OTHER_COMMANDS.includes(tokens.join(' ')) ? null : `not a known command: ${command}`;
  }
  const args = tokens.slice(1);
  try {
    if (args[0] === 'offsets') parseOffsetsCommand(args.slice(1));
    else if (!args.includes('--help') && !args.includes('--version')) loadConfig(args, env);
    return null;
  } catch (err) {
    return `${command}: ${(err as Error).message}`;
  }
}

function commands(body: string): string[] {
  return body
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

function runCli(
  args: string[],
  cwd: string,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; output: string }> {
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KOP_'))),
    ...extraEnv,
  };
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI_BIN, ...args], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    // Progress lines ("2/3 offsets imported (66%)") appear only when a command takes over a second,
    // as on a loaded machine: the docs do not show them, so the comparison leaves them out. Each is
    // one write of a whole line.
    const progress = /^\d+\/\d+ .+ \(\d+%\)\n/gm;
    // Audit lines (JSON, one per changed partition, with the time) are described in docs/admin.md,
    // not repeated in its sessions; proxy/ops/admin/audit.test.ts checks them.
    const audit = /^\{"time":"[^"]+","level":"\w+","event":"admin change".*\}\n/gm;
    child.stderr.on('data', (d: Buffer) => (output += d.toString().replace(progress, '').replace(audit, '')));
    // The docs run their sessions in /home/ops: the CLI names the store's directory it opened.
    child.on('close', (code) => resolve({ code, output: output.split(cwd).join('/home/ops') }));
  });
}

describe('documentation examples', () => {
  beforeAll(async () => {
    await ensureBuilt();
  }, 120_000);

  for (const doc of DOCS) {
    test(`${doc}: every example runs as shown`, async () => {
      const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-docs-'));
      const problems: string[] = [];
      const all = blocks(doc);
      try {
        // Files first: the console examples may use them wherever they appear.
        for (const b of all) {
          if (b.lang === 'text' && b.tag !== undefined && /\./.test(b.tag))
            fs.writeFileSync(path.join(cwd, b.tag), b.body);
        }
        for (const b of all) {
          const where = `${doc}:${b.line}`;
          if (b.lang === 'sh') {
            for (const c of commands(b.body)) {
              const wrong = checkCommand(c);
              if (wrong !== null) problems.push(`${where}: ${wrong}`);
            }
          } else if (b.lang === 'yaml') {
            const file = path.join(cwd, 'example.yaml');
            fs.writeFileSync(file, b.body);
            try {
              loadConfig(['--config', file], {});
            } catch (err) {
              problems.push(`${where}: ${(err as Error).message}`);
            }
          } else if (b.lang === 'console') {
            const lines = b.body.trimEnd().split('\n');
            for (let i = 0; i < lines.length; i++) {
              if (!lines[i]!.startsWith('$ ')) continue;
              const command = lines[i]!.slice(2);
              const expected: string[] = [];
              let code = 0;
              while (i + 1 < lines.length && !lines[i + 1]!.startsWith('$ ')) {
                const next = lines[++i]!;
                const exit = /^# exit (\d+)$/.exec(next);
                if (exit) code = Number(exit[1]);
                else expected.push(next);
              }
              const tokens = words(command);
              // Leading NAME=value words are the command's environment, as in a shell.
              const env: NodeJS.ProcessEnv = {};
              while (tokens.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(tokens[0]!)) {
                const [k, ...v] = tokens.shift()!.split('=');
                env[k!] = v.join('=');
              }
              if (tokens[0] !== 'kafka-offset-proxy') {
                problems.push(`${where}: console examples run kafka-offset-proxy only: ${command}`);
                continue;
              }
              const r = await runCli(tokens.slice(1), cwd, env);
              if (r.code !== code || r.output.trimEnd() !== expected.join('\n')) {
                problems.push(
                  `${where}: $ ${command}\n  wanted (exit ${code}):\n${expected.join('\n')}\n  got (exit ${r.code}):\n${r.output.trimEnd()}`,
                );
              }
            }
          } else if (b.lang === 'text' && b.tag === 'store-urls') {
            for (const url of b.body.trim().split('\n')) {
              try {
                parseStoreUrl(url);
              } catch (err) {
                problems.push(`${where}: ${url}: ${(err as Error).message}`);
              }
            }
          } else if (b.lang === 'text' && b.tag === 'listen-error') {
            const line = listenFailureLine(
              new ListenError(
                'listen',
                { host: '127.0.0.1', port: 19094 },
                1,
                'address already in use (EADDRINUSE)',
              ),
              '127.0.0.1:19092',
            );
            if (b.body.trim() !== `kafka-offset-proxy: ${line}`)
              problems.push(`${where}: the CLI prints\n${line}`);
          } else if (b.lang === 'text' && b.tag === 'startup-log') {
            const shown = b.body.trim();
            const options = /^\S+ INFO {2}starting version=\S+ node=\S+ offsetStore="[^"]*" (.*)$/.exec(
              shown,
            );
            if (options === null) {
              problems.push(`${where}: not a starting line`);
              continue;
            }
            // The options part, made again from the same options with a secret in them.
            const args = words(options[1]!).flatMap((kv) => {
              const eq = kv.indexOf('=');
              const [name, value] = [kv.slice(0, eq), kv.slice(eq + 1)];
              const secret = value.replace(/\*\*\*/g, `a-secret-${STAND_IN}`);
              return [`--${name}`, secret];
            });
            const lines: string[] = [];
            createLogger('info', { service: 'kafka-offset-proxy' }, (l) => lines.push(l), 'text').info(
              'starting',
              startupSummary(loadConfig(args, {})),
            );
            const made = lines[0]!.replace(/^\S+ /, '').replace(/version=\S+ node=\S+ /, '');
            const want = shown.replace(/^\S+ /, '').replace(/version=\S+ node=\S+ /, '');
            if (made !== want) problems.push(`${where}: the proxy logs\n${made}`);
          } else if (!(b.lang === 'text' && b.tag !== undefined && /\./.test(b.tag))) {
            problems.push(`${where}: a block the docs check does not know (\`\`\`${b.lang} ${b.tag ?? ''})`);
          }
        }
      } finally {
        fs.rmSync(cwd, { recursive: true, force: true });
      }
      expect(problems, problems.join('\n\n')).toEqual([]);
    }, 120_000);
  }
});
