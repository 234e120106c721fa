/** Command-line entry point. For now it only prints usage; the proxy core lands with issue #4. */
export const USAGE = `Usage: kafka-offset-proxy --bootstrap-server host:port[,host:port...] --listen host:port
                          [--advertised-host name] [--store URL] [--http host:port] [--config file.yaml]`;

export async function main(argv: string[]): Promise<void> {
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return;
  }
  console.error(USAGE);
  process.exitCode = 2;
}
