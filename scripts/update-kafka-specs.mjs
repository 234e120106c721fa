// `npm run protocol:update -- X.Y.Z`: moves the codec to Apache Kafka X.Y.Z's message specs. It
// resolves org.apache.kafka:kafka-clients:X.Y.Z from Maven Central (the jar ships the specs as
// common/message/*.json), replaces protocol/spec/*.json with them unchanged, records the version in
// protocol/spec/KAFKA_VERSION and regenerates protocol/messages/. Then `git diff --stat` shows what
// changed, and `npm test` says what it breaks: the generator refuses anything it cannot read, the
// pin test asks for the test bed's KAFKA_VERSION to follow, and the ApiVersions parity test
// compares the brokers' offers with the proxy's.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const version = process.argv[2];
if (!version || !/^\d+\.\d+\.\d+$/.test(version)) {
  console.error('usage: npm run protocol:update -- X.Y.Z   (an Apache Kafka release)');
  process.exit(2);
}
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const specDir = path.join(root, 'protocol', 'spec');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-specs-'));
try {
  const artifact = `org.apache.kafka:kafka-clients:${version}`;
  execFileSync(
    'mvn',
    ['-q', '-B', 'dependency:copy', `-Dartifact=${artifact}`, `-DoutputDirectory=${work}`],
    {
      stdio: 'inherit',
    },
  );
  const jar = path.join(work, `kafka-clients-${version}.jar`);
  execFileSync('unzip', ['-q', '-o', jar, 'common/message/*.json', '-d', work], { stdio: 'inherit' });
  const fresh = path.join(work, 'common', 'message');
  const specs = fs.readdirSync(fresh).filter((f) => f.endsWith('.json'));
  if (specs.length === 0) throw new Error(`${artifact} has no common/message/*.json`);
  for (const old of fs.readdirSync(specDir)) {
    if (old.endsWith('.json')) fs.rmSync(path.join(specDir, old));
  }
  for (const f of specs) fs.copyFileSync(path.join(fresh, f), path.join(specDir, f));
  fs.writeFileSync(path.join(specDir, 'KAFKA_VERSION'), `${version}\n`);
  console.log(`protocol/spec: ${specs.length} specs of Kafka ${version}`);
  execFileSync('npm', ['run', '--silent', 'generate'], { cwd: root, stdio: 'inherit' });
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
