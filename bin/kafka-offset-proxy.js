#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (built by `npm ci` through the prepare script).

// Node.js opens its inspector (a debugger port, full control of the process: the store password,
// the admin token) on SIGUSR1 unless the process listens for it. Listening replaces that trigger,
// so this comes first, before anything is loaded; the proxy logs the signal (proxy/signals.ts).
process.on('SIGUSR1', () => {});

// V8's young generation is left to grow under load. Held at its first size, scavenges took a large
// share of the commit path's CPU for a small saving of peak RSS (docs/benchmarks.md).

// Under npm (`npx kafka-offset-proxy`, `npm exec`, an npm script), npm runs this file through
// `sh -c`: a SIGTERM or SIGINT sent to npm is passed to that shell, which dies without passing it
// on, and the proxy would keep running as an orphan. So when started by npm, the parent going
// away is taken as the signal npm received: the proxy shuts down as on SIGTERM.
if (process.env.npm_lifecycle_event !== undefined && process.ppid > 1) {
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    process.kill(process.pid, 'SIGTERM');
  }, 250);
  watch.unref();
}

// The specifier is a variable so the type check takes the CLI's type from its source (the compiled
// dist/ has no declarations) while the launcher runs the compiled file.
const compiledCli = '../dist/proxy/cli.js';
/** @type {Promise<typeof import('../proxy/cli.js')>} */
const cli = import(compiledCli);
cli
  .then((m) => m.main(process.argv.slice(2)))
  .catch((err) => {
    console.error(`kafka-offset-proxy: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
