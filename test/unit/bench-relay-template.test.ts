// The command templates of bench/proxy.ts's --external-side: what a relay is started with must be
// the placeholders' values, a configuration template is expanded into a file of its own, and a
// misspelt placeholder stops the bench instead of reaching the relay.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { expandTemplate } from '../../bench/relays.js';

const values = { listenPort: 30001, brokerHost: '127.0.0.1', brokerPort: 9092 };

describe('expandTemplate', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-template-test-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('replaces every placeholder, however often it occurs', () => {
    expect(
      expandTemplate(
        'relay --map "{brokerHost}:{brokerPort},127.0.0.1:{listenPort}" --port {listenPort}',
        values,
        dir,
      ),
    ).toBe('relay --map "127.0.0.1:9092,127.0.0.1:30001" --port 30001');
  });

  test('a {file:...} becomes a copy with its own placeholders expanded, YAML braces left alone', () => {
    const template = path.join(dir, 'relay.yaml');
    fs.writeFileSync(
      template,
      'target: {brokerHost}:{brokerPort}\nlisten: {listenPort}\nmetrics: {}\nx: {a: b}\n',
    );
    const command = expandTemplate(`relay --config {file:${template}}`, values, dir);
    const written = /^relay --config (\S+)$/.exec(command)![1]!;
    expect(written).not.toBe(template);
    expect(fs.readFileSync(written, 'utf8')).toBe(
      'target: 127.0.0.1:9092\nlisten: 30001\nmetrics: {}\nx: {a: b}\n',
    );
  });

  test('an unknown placeholder is an error', () => {
    expect(() => expandTemplate('relay --port {listenport}', values, dir)).toThrow(
      'unknown placeholder {listenport}',
    );
  });
});
