"""A librdkafka consumer for the chaos run (python confluent-kafka; run with /usr/bin/python3).

Consumes --topic in --group from the earliest offset and, after every batch, commits the batch's
next offsets synchronously. It prints the same JSON events as Kafka's VerifiableConsumer, so the
chaos run reads both alike, one per line on stdout:

  {"name":"partitions_assigned"|"partitions_revoked", "partitions":[{"partition":p}]}
  {"name":"records_consumed", "partitions":[{"partition":p,"minOffset":a,"maxOffset":b}]}
  {"name":"offsets_committed", "success":true|false, "error":..., "offsets":[{"partition":p,"offset":o}]}

Runs until SIGTERM.
"""

import argparse
import json
import signal
import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition

running = True


def stop(*_):
    global running
    running = False


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    args = p.parse_args()
    signal.signal(signal.SIGTERM, stop)

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": "chaos-librdkafka",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
        }
    )

    def on_assign(c, partitions):
        emit({"name": "partitions_assigned", "partitions": [{"partition": tp.partition} for tp in partitions]})

    def on_revoke(c, partitions):
        emit({"name": "partitions_revoked", "partitions": [{"partition": tp.partition} for tp in partitions]})

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while running:
        msgs = consumer.consume(num_messages=500, timeout=0.5)
        ranges = {}
        for m in msgs:
            if m.error() is not None:
                continue
            lo, hi = ranges.get(m.partition(), (m.offset(), m.offset()))
            ranges[m.partition()] = (min(lo, m.offset()), max(hi, m.offset()))
        if not ranges:
            continue
        emit(
            {
                "name": "records_consumed",
                "partitions": [{"partition": p, "minOffset": lo, "maxOffset": hi} for p, (lo, hi) in ranges.items()],
            }
        )
        offsets = [TopicPartition(args.topic, p, hi + 1) for p, (lo, hi) in ranges.items()]
        listed = [{"partition": tp.partition, "offset": tp.offset} for tp in offsets]
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False)
            errs = [tp.error for tp in (result or []) if tp.error is not None]
            if errs:
                raise KafkaException(errs[0])
            emit({"name": "offsets_committed", "success": True, "offsets": listed})
        except KafkaException as e:
            err = e.args[0]
            code = err.name() if hasattr(err, "name") else str(err)
            emit({"name": "offsets_committed", "success": False, "error": code, "offsets": listed})
    consumer.close()


if __name__ == "__main__":
    main()
