// How many more refused commits a test lets the proxy give than the broker gave directly in the
// same run, for counts of rare events that vary with thread scheduling at load average 10 and more
// (which commit meets which epoch bump or rebalance, which store round trip meets a stalled
// machine): 5 and half the direct count. Each test that uses it says, from its own measured
// run-to-run variance, why that is wider than any excess seen, and the failure it must still catch.
export const refusalTolerance = (direct: number): number => 5 + Math.floor(direct / 2);
