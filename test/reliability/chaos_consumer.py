"""A librdkafka consumer for the chaos run (python confluent-kafka; run with /usr/bin/python3).

Consumes --topic in --group from the earliest offset and, after every batch, commits the batch's
next offsets synchronously. It prints the same JSON events as Kafka's VerifiableConsumer, so the
chaos run reads both alike, one per line on stdout:

  {"name":"partitions_assigned"|"partitions_revoked", "partitions":[{"partition":p}]}
  {"name":"records_consumed", "partitions":[{"partition":p,"minOffset":a,"maxOffset":b}]}
  {"name":"offsets_committed", "success":true|false, "error":..., "offsets":[{"partition":p,"offset":o}]}

Runs until SIGTERM.
"""

import os
import signal
import sys

# The bed's clients folder holds what this member shares with the others (committing_member.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bed", "clients"))

from committing_member import commit_sync, committing_consumer, emit, member_args  # noqa: E402
from confluent_kafka import TopicPartition  # noqa: E402

running = True


def stop(*_):
    global running
    running = False


def main():
    args = member_args().parse_args()
    signal.signal(signal.SIGTERM, stop)

    consumer = committing_consumer(args, "chaos-librdkafka", {"auto.offset.reset": "earliest"})

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
        code = commit_sync(consumer, offsets)
        if code is None:
            emit({"name": "offsets_committed", "success": True, "offsets": listed})
        else:
            emit({"name": "offsets_committed", "success": False, "error": code, "offsets": listed})
    consumer.close()


if __name__ == "__main__":
    main()
