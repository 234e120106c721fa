// `npm run bed:prefetch`: resolves the Maven artifacts of both pinned Kafka versions (broker, tools,
// clients, log binding) into ~/.m2 and caches their classpaths, builds franz-go's ETL program
// (test/bed/go/franzetl, with Go from the module proxy) and makes the venv of the modern librdkafka
// (python confluent-kafka 2.16.2, test/bed/clients/python-modern.ts), so test runs never wait for
// Maven, Go or pip. Plain .mjs so it runs with `node`; the bed itself is TypeScript, loaded through
// tsx.
import { tsImport } from 'tsx/esm/api';

const bed = await tsImport('./kafka.ts', import.meta.url);
for (const version of [bed.KAFKA_VERSION, bed.KAFKA_COMPAT_VERSION]) {
  const t0 = Date.now();
  const classpath = await bed.kafkaClasspath(version);
  const jars = classpath.split(':').length;
  console.log(
    `Kafka ${version}: ${jars} jars (${((Date.now() - t0) / 1000).toFixed(1)} s), cached in ${bed.bedCacheDir()}`,
  );
}
const franz = await tsImport('./clients/franz-etl.ts', import.meta.url);
let t0 = Date.now();
const binary = await franz.franzEtlBinary();
console.log(`franz-go ETL program: ${binary} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
const modern = await tsImport('./clients/python-modern.ts', import.meta.url);
t0 = Date.now();
const python = await modern.modernPython();
console.log(
  `confluent-kafka ${modern.MODERN_CONFLUENT_KAFKA.version} (librdkafka ${modern.MODERN_CONFLUENT_KAFKA.librdkafka}): ` +
    `${python} (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
);
