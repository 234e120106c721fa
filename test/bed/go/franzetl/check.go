package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// levelReport is what one group of the chain did, and what reached its output topic.
type levelReport struct {
	Group   string `json:"group"`
	Members int    `json:"members"`
	// Distinct records (partition, offset) of the input topic consumed, and those consumed again.
	Consumed   int64 `json:"consumed"`
	Duplicates int   `json:"duplicates"`
	// Records in the output topic, the distinct keys among them, and keys 0..records-1 missing.
	Output      int `json:"output"`
	OutputKeys  int `json:"outputKeys"`
	MissingKeys int `json:"missingKeys"`
	ProduceErr  int `json:"produceErrors"`
	// The group's committed offset and the end offset of each partition of its input topic.
	Committed  map[string]int64 `json:"committed"`
	Ends       map[string]int64 `json:"ends"`
	PollErrors []string         `json:"pollErrors"`
	CheckError string           `json:"checkError,omitempty"`
}

func (l *level) report(ctx context.Context, o options, adm *kadm.Client) levelReport {
	l.mu.Lock()
	r := levelReport{
		Group:      l.group,
		Members:    int(l.members.Load()),
		Consumed:   l.distinct.Load(),
		Duplicates: l.duplicates,
		ProduceErr: l.produceErr,
		Committed:  map[string]int64{},
		Ends:       map[string]int64{},
		PollErrors: append([]string{}, l.pollErrors...),
	}
	l.mu.Unlock()
	if err := l.readCommitted(ctx, adm, &r); err != nil {
		r.CheckError = err.Error()
		return r
	}
	keys, total, err := readKeys(ctx, o, adm, l.produceTo)
	if err != nil {
		r.CheckError = err.Error()
		return r
	}
	r.Output, r.OutputKeys = total, len(keys)
	for i := range o.records {
		if _, ok := keys[i]; !ok {
			r.MissingKeys++
		}
	}
	return r
}

func (l *level) readCommitted(ctx context.Context, adm *kadm.Client, r *levelReport) error {
	ends, err := adm.ListEndOffsets(ctx, l.consumeFrom)
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", l.consumeFrom, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("end offsets of %s: %w", l.consumeFrom, err)
	}
	ends.Each(func(e kadm.ListedOffset) { r.Ends[strconv.Itoa(int(e.Partition))] = e.Offset })
	committed, err := adm.FetchOffsets(ctx, l.group)
	if err != nil {
		return fmt.Errorf("committed offsets of %s: %w", l.group, err)
	}
	committed.Each(func(c kadm.OffsetResponse) {
		if c.Topic == l.consumeFrom && c.Err == nil {
			r.Committed[strconv.Itoa(int(c.Partition))] = c.At
		}
	})
	return nil
}

// readKeys reads a topic from the start to its current end offsets, outside any group: the
// distinct keys and the number of records.
func readKeys(ctx context.Context, o options, adm *kadm.Client, topic string) (map[int]struct{}, int, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, 0, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Offset > 0 {
			remaining[e.Partition] = e.Offset
		}
	})
	keys := map[int]struct{}{}
	total := 0
	if len(remaining) == 0 {
		return keys, 0, nil
	}
	cl, err := kgo.NewClient(o.clientOpts(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	for len(remaining) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return keys, total, fmt.Errorf("reading %s: %d partitions unread: %w", topic, len(remaining), err)
		}
		for r := range fetches.RecordsAll() {
			end, open := remaining[r.Partition]
			if !open || r.Offset >= end {
				continue
			}
			total++
			if k, err := strconv.Atoi(string(r.Key)); err == nil {
				keys[k] = struct{}{}
			}
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		}
	}
	return keys, total, nil
}
