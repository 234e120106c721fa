// `npm run bed:prefetch`: resolves the Maven artifacts of both pinned Kafka versions (broker, tools,
// clients, log binding) into ~/.m2 and caches their classpaths, and builds franz-go's ETL program
// (test/bed/go/franzetl, with Go from the module proxy), so test runs never wait for Maven or Go.
// Plain .mjs so it runs with `node`; the bed itself is TypeScript, loaded through tsx.
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
const t0 = Date.now();
const binary = await franz.franzEtlBinary();
console.log(`franz-go ETL program: ${binary} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
