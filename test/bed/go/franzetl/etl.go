package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitTally counts commits as the members saw them, by "how:outcome": how is auto (autocommit),
// round (before a round of polls) or revoke (on revocation); outcome is ok or the error's name.
type commitTally struct {
	mu     sync.Mutex
	counts map[string]int
}

func newCommitTally() *commitTally { return &commitTally{counts: map[string]int{}} }

func (t *commitTally) add(how string, err error) {
	outcome := "ok"
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			outcome = ke.Message
		} else {
			outcome = "client: " + err.Error()
			if len(outcome) > 80 {
				outcome = outcome[:80]
			}
		}
	}
	t.mu.Lock()
	t.counts[how+":"+outcome]++
	t.mu.Unlock()
}

// addResponse counts an autocommit by the first error code among its partitions.
func (t *commitTally) addResponse(how string, resp *kmsg.OffsetCommitResponse, err error) {
	if err == nil && resp != nil {
		for _, topic := range resp.Topics {
			for _, p := range topic.Partitions {
				if err == nil {
					err = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	}
	t.add(how, err)
}

func (t *commitTally) snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.counts))
	for k, v := range t.counts {
		out[k] = v
	}
	return out
}

type partOffset struct {
	partition int32
	offset    int64
}

// level is one consumer group of the chain: franz-go's testConsumer.
type level struct {
	o           options
	index       int
	group       string
	consumeFrom string
	produceTo   string
	tally       *commitTally
	admin       *kgo.Client

	wg        sync.WaitGroup
	members   atomic.Int32
	instances atomic.Int32

	mu         sync.Mutex
	seen       map[partOffset]struct{}
	distinct   atomic.Int64
	duplicates int
	produceErr int
	pollErrors []string
}

func newLevel(o options, index int, consumeFrom, produceTo string, tally *commitTally, admin *kgo.Client) *level {
	return &level{
		admin:       admin,
		o:           o,
		index:       index,
		group:       fmt.Sprintf("%s-g%d", o.topicPrefix, index),
		consumeFrom: consumeFrom,
		produceTo:   produceTo,
		tally:       tally,
		seen:        map[partOffset]struct{}{},
	}
}

func (l *level) wait() { l.wg.Wait() }

func (l *level) done() bool { return l.distinct.Load() >= int64(l.o.records) }

func (l *level) goMember(ctx context.Context, roundsBeforeQuit int) {
	l.wg.Add(1)
	l.members.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.member(ctx, roundsBeforeQuit); err != nil {
			l.mu.Lock()
			if len(l.pollErrors) < 10 {
				l.pollErrors = append(l.pollErrors, err.Error())
			}
			l.mu.Unlock()
		}
	}()
}

// member is franz-go's testConsumer.etl: rounds of four short polls of at most 25 records while
// rebalances are blocked, every record produced to the next topic. A member with
// roundsBeforeQuit >= 0 commits before each round and quits, without committing, at the first
// poll after that many rounds; the others commit on revocation and stay until the level has
// consumed every record.
func (l *level) member(ctx context.Context, roundsBeforeQuit int) error {
	rounds := 0
	balancer := kgo.GroupBalancer(kgo.StickyBalancer())
	if l.o.balancer == "range" {
		balancer = kgo.RangeBalancer()
	}
	quitting := func() bool { return roundsBeforeQuit >= 0 && rounds >= roundsBeforeQuit }
	opts := l.o.clientOpts(
		kgo.SessionTimeout(l.o.sessionTime),
		kgo.ConsumerGroup(l.group),
		kgo.ConsumeTopics(l.consumeFrom),
		kgo.Balancers(balancer),
		kgo.ServerSideBalancer(), // franz-go's opt-in to KIP-848 groups
		kgo.MaxBufferedRecords(10000),
		kgo.MaxBufferedBytes(50000),
		kgo.ConsumePreferringLagFn(kgo.PreferLagAt(1)),
		kgo.BlockRebalanceOnPoll(),
		kgo.AutoCommitInterval(l.o.autoCommit),
		kgo.AutoCommitCallback(func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			l.tally.addResponse("auto", resp, err)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if quitting() {
				return
			}
			l.tally.add("revoke", cl.CommitUncommittedOffsets(ctx))
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {}),
	)
	instanceID := ""
	if l.o.static {
		instanceID = fmt.Sprintf("static-%s-%d", l.group, l.instances.Add(1))
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer l.leaveStatic(instanceID)
	defer cl.Close()
	defer func() {
		defer cl.LeaveGroup()
		if err := cl.Flush(context.Background()); err != nil {
			l.countProduceError()
		}
	}()
	defer cl.AllowRebalance()

	for ctx.Err() == nil {
		cl.AllowRebalance()
		if roundsBeforeQuit > 0 {
			l.tally.add("round", cl.CommitUncommittedOffsets(ctx))
		}
		for range 4 {
			pollCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			fetches := cl.PollRecords(pollCtx, 25)
			cancel()
			if err := fetches.Err(); errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				if l.done() || ctx.Err() != nil {
					return nil
				}
				if fetches.NumRecords() == 0 {
					continue
				}
			} else if errs := fetches.Errors(); len(errs) > 0 {
				return fmt.Errorf("poll: %v", errs)
			}
			if quitting() {
				return nil
			}
			for r := range fetches.RecordsAll() {
				if _, err := strconv.Atoi(string(r.Key)); err != nil {
					return fmt.Errorf("record key %q is not a number", r.Key)
				}
				l.consumed(r)
				cl.Produce(ctx, &kgo.Record{Topic: l.produceTo, Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
					if err != nil {
						l.countProduceError()
					}
				})
			}
		}
		rounds++
	}
	return nil
}

// leaveStatic removes a static member from the group once its client has closed, as franz-go's
// test does (a closing static member only leaves temporarily, keeping its partitions until its
// session times out): the member's id from ConsumerGroupDescribe, then a heartbeat at epoch -1.
func (l *level) leaveStatic(instanceID string) {
	if instanceID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	describe := kmsg.NewPtrConsumerGroupDescribeRequest()
	describe.Groups = []string{l.group}
	described, err := describe.RequestWith(ctx, l.admin)
	if err != nil {
		return
	}
	for _, g := range described.Groups {
		for _, m := range g.Members {
			if m.InstanceID != nil && *m.InstanceID == instanceID {
				leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				leave.Group = l.group
				leave.MemberID = m.MemberID
				leave.InstanceID = m.InstanceID
				leave.MemberEpoch = -1
				_, _ = leave.RequestWith(ctx, l.admin) // best effort, as franz-go's test
				return
			}
		}
	}
}

func (l *level) consumed(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := partOffset{r.Partition, r.Offset}
	if _, again := l.seen[key]; again {
		l.duplicates++
		return
	}
	l.seen[key] = struct{}{}
	l.distinct.Add(1)
}

func (l *level) countProduceError() {
	l.mu.Lock()
	l.produceErr++
	l.mu.Unlock()
}

type produceResult struct {
	acked  int
	errors int
}

// produce writes keys 0..records-1 (a small fixed body, as franz-go's test), spread over
// --produce-over when set, and waits for every acknowledgement.
func produce(ctx context.Context, o options, topic string) produceResult {
	cl, err := kgo.NewClient(o.clientOpts(kgo.MaxBufferedRecords(10000))...)
	if err != nil {
		return produceResult{errors: o.records}
	}
	defer cl.Close()
	body := []byte("franzetl-0123456789abcdef0123456789abcdef")
	var acked, failed atomic.Int64
	start := time.Now()
	for i := range o.records {
		if o.produceOver > 0 {
			due := start.Add(time.Duration(int64(o.produceOver) * int64(i) / int64(o.records)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: body}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			} else {
				acked.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		failed.Add(int64(o.records) - acked.Load() - failed.Load())
	}
	return produceResult{acked: int(acked.Load()), errors: int(failed.Load())}
}
