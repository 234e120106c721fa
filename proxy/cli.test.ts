import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { optionsMarkdown, redactUrl, startupSummary } from './cli.js';
import { loadConfig, OPTIONS, usage } from './config.js';
import { createLogger } from './logger.js';

const docFile = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/configuration.md');
const BEGIN = /<!-- options:begin[^>]*-->\n/;
const END = '<!-- options:end -->';

describe('configuration documentation', () => {
  it('docs/configuration.md lists exactly the options of OPTIONS, as generated', () => {
    const doc = readFileSync(docFile, 'utf8');
    const begin = BEGIN.exec(doc);
    const end = doc.indexOf(END);
    expect(begin, 'options:begin marker').not.toBeNull();
    expect(end).toBeGreaterThan(begin!.index);
    const current = doc.slice(begin!.index + begin![0].length, end).trim();
    const expected = optionsMarkdown();
    if (current !== expected && process.env['KOP_UPDATE_DOCS'] === '1') {
      writeFileSync(
        docFile,
        doc.slice(0, begin!.index + begin![0].length) + expected + '\n' + doc.slice(end),
      );
      return;
    }
    expect(current, 'run with KOP_UPDATE_DOCS=1 to regenerate').toBe(expected);
    for (const o of OPTIONS) expect(current).toContain(`\`--${o.name}\``);
  });

  it('--help lists every option with its default and allowed values', () => {
    const text = usage();
    for (const o of OPTIONS) {
      const line = text.split('\n').find((l) => l.trimStart().startsWith(`--${o.name} `));
      expect(line, o.name).toBeDefined();
      if (o.default !== undefined) expect(line).toContain(`(default ${o.default})`);
      for (const v of o.values ?? []) expect(line).toContain(v);
    }
  });
});

describe('startup log', () => {
  it('masks passwords in store URLs', () => {
    expect(redactUrl('redis://:hunter2@redis:6379/0')).toBe('redis://:***@redis:6379/0');
    expect(redactUrl('rediss://app:p@ss@redis:6380')).not.toContain('p@ss');
    expect(redactUrl('redis+cluster://u:pw1@a:1,u:pw2@b:2')).toBe('redis+cluster://u:***@a:1,u:***@b:2');
    expect(redactUrl('zk://zk1:2181,zk2:2181/kop')).toBe('zk://zk1:2181,zk2:2181/kop');
  });

  it('shows the version, the store and every option given, without the token or any password', () => {
    const config = loadConfig(
      ['--bootstrap-server', 'k:9092', '--http', '127.0.0.1:9464', '--lag-groups-exclude', 'tmp-*,test'],
      {
        KOP_HTTP_TOKEN: 'tok-very-secret-4f9a27',
        KOP_STORE: 'redis://:hunter2@r:6379?wait=1',
        KOP_CLUSTER_SASL_MECHANISM: 'PLAIN',
        KOP_CLUSTER_SASL_USERNAME: 'proxy',
        KOP_CLUSTER_SASL_PASSWORD: 'sasl-secret',
      },
    );
    const summary = startupSummary(config);
    const text = JSON.stringify(summary);
    for (const secret of ['tok-very-secret-4f9a27', 'hunter2', 'sasl-secret'])
      expect(text).not.toContain(secret);
    expect(summary).toMatchObject({
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      offsetStore: 'redis r:6379',
      'bootstrap-server': 'k:9092',
      http: '127.0.0.1:9464',
      'http-token': '***',
      store: 'redis://:***@r:6379?wait=1',
      'lag-groups-exclude': 'tmp-*,test',
      'cluster-sasl-username': 'proxy',
      'cluster-sasl-password': '***',
    });
    // Every option given is shown (defaults are documented; an option given and not shown would hide it).
    for (const name of config.given.keys()) expect(summary, name).toHaveProperty([name]);
  });

  it('text logs: one line per event, fields as key=value', () => {
    const lines: string[] = [];
    const log = createLogger('info', { service: 'kafka-offset-proxy' }, (l) => lines.push(l), 'text');
    log.info('starting', { version: '1.2.3', listen: '127.0.0.1:19092', note: 'two words\nand a break' });
    log.warn('offset store not answering', { error: new Error('connection refused to r:6379') });
    log.debug('hidden');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO {2}starting version=1\.2\.3 listen=127\.0\.0\.1:19092 note="two words\\nand a break"$/,
    );
    expect(lines[1]).toMatch(/WARN {2}offset store not answering error="connection refused to r:6379"$/);
    expect(lines.join('')).not.toContain('service=');
  });
});
