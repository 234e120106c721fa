"""A librdkafka group member that commits on and on, for store-outage tests (python confluent-kafka).

Run with /usr/bin/python3. Subscribes to --topic in --group (session.timeout.ms 10000, the default
heartbeat interval of 3 s) and, once it has an assignment, commits synchronously every
--interval-ms: commit k sets every assigned partition to offset k (k = 1, 2, ...; the store takes
offsets past the log end). It runs until a line "stop" arrives on stdin, then prints what the group
coordinator has for the partitions and closes. One JSON object per line on stdout:

  {"type":"assigned"|"revoked"|"lost", "partitions":[...], "t":ms}   rebalance callbacks
  {"type":"commit", "offset":k, "ok":true|false, "code":name, "ms":duration, "t":ms}
  {"type":"client-error", "code":name, "message":..., "t":ms}      error_cb (session timeouts too)
  {"type":"member", "memberId":...}                                  at the end, before the read-back
  {"type":"committed", "offsets":{"<partition>":offset}}
"""

import select
import sys
import time

from committing_member import commit_sync, committing_consumer, member_args
from committing_member import emit as write_event
from confluent_kafka import TopicPartition

T0 = time.monotonic()


def now_ms():
    return int((time.monotonic() - T0) * 1000)


def emit(obj):
    obj["t"] = now_ms()
    write_event(obj)


def main():
    p = member_args()
    p.add_argument("--interval-ms", type=int, default=200)
    args = p.parse_args()

    def on_error(err):
        emit({"type": "client-error", "code": err.name(), "message": err.str()})

    consumer = committing_consumer(args, "outage-consumer", {"error_cb": on_error})
    assigned = []

    def on_assign(c, partitions):
        assigned[:] = [tp.partition for tp in partitions]
        emit({"type": "assigned", "partitions": sorted(assigned)})

    def on_revoke(c, partitions):
        assigned[:] = []
        emit({"type": "revoked", "partitions": sorted(tp.partition for tp in partitions)})

    def on_lost(c, partitions):
        assigned[:] = []
        emit({"type": "lost", "partitions": sorted(tp.partition for tp in partitions)})

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    k = 0
    next_commit = time.monotonic()
    while True:
        if select.select([sys.stdin], [], [], 0)[0] and sys.stdin.readline().strip() == "stop":
            break
        consumer.poll(0.05)
        if not assigned or time.monotonic() < next_commit:
            continue
        k += 1
        offsets = [TopicPartition(args.topic, p, k) for p in assigned]
        started = time.monotonic()
        code = commit_sync(consumer, offsets)
        ms = int((time.monotonic() - started) * 1000)
        if code is None:
            emit({"type": "commit", "offset": k, "ok": True, "ms": ms})
        else:
            emit({"type": "commit", "offset": k, "ok": False, "code": code, "ms": ms})
        next_commit = time.monotonic() + args.interval_ms / 1000.0
    try:
        member = consumer.memberid()
    except Exception:  # older bindings
        member = None
    emit({"type": "member", "memberId": member})
    parts = [TopicPartition(args.topic, p) for p in assigned]
    got = consumer.committed(parts, timeout=20) if parts else []
    emit({"type": "committed", "offsets": {str(tp.partition): tp.offset for tp in got}})
    consumer.close()


if __name__ == "__main__":
    main()
