// franzetl runs franz-go's KIP-848 group ETL pattern (TestGroupETL / testChainETL in franz-go's
// pkg/kgo tests) against one bootstrap address and prints what happened as JSON lines, for the
// proxy's integration tests (test/integration/guard-kip848-franz.test.ts).
//
// A producer writes keys 0..records-1 to the first topic of a chain; each level of the chain is a
// KIP-848 consumer group (franz-go's ServerSideBalancer) whose members consume the level's input
// topic, produce every record to the next topic and commit: autocommit, a commit before every round
// of polls for members that quit after a few rounds, and a commit on revocation. Members join and
// leave in two waves as franz-go's test has them (some quit at once, some after one or two rounds,
// without committing their last polls), so commits race the heartbeats that move member epochs.
//
// Unlike franz-go's test, a record consumed twice (after a commit the coordinator refused) is
// counted, not fatal: the proxy's test compares such counts between the broker and the proxy.
// Our own code only: franz-go is a module dependency, pinned in go.mod.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type options struct {
	brokers     []string
	topicPrefix string
	records     int
	partitions  int
	levels      int
	balancer    string
	static      bool
	waveDelay   time.Duration
	autoCommit  time.Duration
	sessionTime time.Duration
	produceOver time.Duration
	timeout     time.Duration
	verbose     bool
}

func parseOptions() options {
	var o options
	var brokers string
	flag.StringVar(&brokers, "brokers", "", "bootstrap address(es), comma separated")
	flag.StringVar(&o.topicPrefix, "topic-prefix", "", "names of the chain's topics (<prefix>-0 ...) and groups (<prefix>-g1 ...)")
	flag.IntVar(&o.records, "records", 20000, "records produced to the first topic")
	flag.IntVar(&o.partitions, "partitions", 11, "partitions of every topic of the chain")
	flag.IntVar(&o.levels, "levels", 3, "consumer groups in the chain (franz-go's test has 3)")
	flag.StringVar(&o.balancer, "balancer", "sticky", "range or sticky: the server-side assignor franz-go asks for (range, uniform)")
	flag.BoolVar(&o.static, "static", false, "static members (an instance id each), as franz-go's sticky/848/static case")
	flag.DurationVar(&o.waveDelay, "wave-delay", 5*time.Second, "time between the first and the second wave of members")
	flag.DurationVar(&o.autoCommit, "autocommit", 5*time.Second, "autocommit interval (franz-go's default: 5s)")
	flag.DurationVar(&o.sessionTime, "session-timeout", 20*time.Second, "session timeout (franz-go's test: 20s)")
	flag.DurationVar(&o.produceOver, "produce-over", 0, "spread producing over this long (0: as fast as possible)")
	flag.DurationVar(&o.timeout, "timeout", 150*time.Second, "give up (timedOut) after this long")
	flag.BoolVar(&o.verbose, "verbose", false, "franz-go's own log on stderr (info level)")
	flag.Parse()
	o.brokers = strings.Split(brokers, ",")
	if brokers == "" || o.topicPrefix == "" || o.records <= 0 || o.levels <= 0 {
		fmt.Fprintln(os.Stderr, "franzetl: --brokers, --topic-prefix and a positive --records and --levels are needed")
		os.Exit(2)
	}
	if o.balancer != "range" && o.balancer != "sticky" {
		fmt.Fprintln(os.Stderr, "franzetl: --balancer is range or sticky (the balancers franz-go runs KIP-848 groups with)")
		os.Exit(2)
	}
	return o
}

func (o options) clientOpts(more ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(o.brokers...), kgo.UnknownTopicRetries(-1)}
	if o.verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	return append(opts, more...)
}

func topicName(prefix string, level int) string { return fmt.Sprintf("%s-%d", prefix, level) }

func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

func main() {
	o := parseOptions()
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	adminClient, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		fail("admin client", err)
	}
	defer adminClient.Close()
	adm := kadm.NewClient(adminClient)
	topics := make([]string, o.levels+1)
	for i := range topics {
		topics[i] = topicName(o.topicPrefix, i)
	}
	created, err := adm.CreateTopics(ctx, int32(o.partitions), -1, nil, topics...)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		fail("create topics", err)
	}

	tally := newCommitTally()
	chain := make([]*level, o.levels)
	for i := range chain {
		chain[i] = newLevel(o, i+1, topics[i], topics[i+1], tally, adminClient)
	}

	var produced produceResult
	var producerDone sync.WaitGroup
	producerDone.Add(1)
	go func() {
		defer producerDone.Done()
		produced = produce(ctx, o, topics[0])
	}()

	// franz-go's testChainETL: three members per level that stay, one of level 1 that quits at
	// once, members of levels 1 and 2 that quit after two rounds; after a while a second wave of
	// three per level, one of level 2 that quits at once and one of level 1 after one round.
	for range 3 {
		for _, l := range chain {
			l.goMember(ctx, -1)
		}
	}
	chain[0].goMember(ctx, 0)
	chain[0].goMember(ctx, 2)
	if len(chain) > 1 {
		chain[1].goMember(ctx, 2)
	}
	select {
	case <-time.After(o.waveDelay):
	case <-ctx.Done():
	}
	for range 3 {
		for _, l := range chain {
			l.goMember(ctx, -1)
		}
	}
	if len(chain) > 1 {
		chain[1].goMember(ctx, 0)
	}
	chain[0].goMember(ctx, 1)

	for _, l := range chain {
		l.wait()
	}
	producerDone.Wait()
	timedOut := ctx.Err() != nil

	// What reached every topic and what every group committed, read afresh (a new context: the
	// run's may have expired, and the report matters most then).
	checkCtx, checkCancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer checkCancel()
	levels := make([]levelReport, len(chain))
	members := 0
	for i, l := range chain {
		levels[i] = l.report(checkCtx, o, adm)
		members += levels[i].Members
	}
	printJSON(map[string]any{
		"type":          "done",
		"produced":      produced.acked,
		"produceErrors": produced.errors,
		"levels":        levels,
		"members":       members,
		"timedOut":      timedOut,
		"commits":       tally.snapshot(),
		"elapsedMs":     time.Since(started).Milliseconds(),
	})
}

func fail(what string, err error) {
	printJSON(map[string]any{"type": "error", "what": what, "error": err.Error()})
	os.Exit(1)
}
