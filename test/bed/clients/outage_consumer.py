"""A librdkafka group member that commits on and on, for store-outage tests (python confluent-kafka).

Runs under Debian's /usr/bin/python3 (confluent-kafka 1.7, librdkafka 2.0.2) or the bed's venv of
confluent-kafka 2.16.2 (test/bed/clients/python-modern.ts), which also speaks KIP-848
(--group-protocol consumer). Subscribes to --topic in --group (classic: --session-timeout-ms,
default 10000, and the default heartbeat interval of 3 s; KIP-848: the session and heartbeat the
broker gives the group) and, once it has an assignment, commits synchronously every
--interval-ms: commit k sets every assigned partition to offset k (k = 1, 2, ...; the store takes
offsets past the log end). It runs until a line "stop" arrives on stdin, then prints what the group
coordinator has for the partitions and closes. One JSON object per line on stdout:

  {"type":"assigned"|"revoked"|"lost", "partitions":[...], "memberId":..., "t":ms}   rebalance
      callbacks (KIP-848's are incremental: the partitions added or taken away)
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
    p.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    p.add_argument("--session-timeout-ms", type=int, default=10000, help="classic only")
    args = p.parse_args()

    def on_error(err):
        emit({"type": "client-error", "code": err.name(), "message": err.str()})

    extra = {"error_cb": on_error}
    if args.group_protocol == "consumer":
        # Only set when asked: confluent-kafka 1.7 does not know the property.
        extra["group.protocol"] = "consumer"
    else:
        extra["session.timeout.ms"] = args.session_timeout_ms
    consumer = committing_consumer(args, "outage-consumer", extra)
    assigned = set()

    def member_id(c):
        try:
            return c.memberid()
        except Exception:  # older bindings
            return None

    # Eager (classic) callbacks revoke everything and assign the whole set; KIP-848's incremental
    # ones add and take away partitions: tracking a set serves both.
    def on_assign(c, partitions):
        assigned.update(tp.partition for tp in partitions)
        added = sorted(tp.partition for tp in partitions)
        emit({"type": "assigned", "partitions": added, "memberId": member_id(c)})

    def on_revoke(c, partitions):
        assigned.difference_update(tp.partition for tp in partitions)
        emit({"type": "revoked", "partitions": sorted(tp.partition for tp in partitions)})

    def on_lost(c, partitions):
        assigned.difference_update(tp.partition for tp in partitions)
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
        offsets = [TopicPartition(args.topic, p, k) for p in sorted(assigned)]
        started = time.monotonic()
        code = commit_sync(consumer, offsets)
        ms = int((time.monotonic() - started) * 1000)
        if code is None:
            emit({"type": "commit", "offset": k, "ok": True, "ms": ms})
        else:
            emit({"type": "commit", "offset": k, "ok": False, "code": code, "ms": ms})
        next_commit = time.monotonic() + args.interval_ms / 1000.0
    emit({"type": "member", "memberId": member_id(consumer)})
    parts = [TopicPartition(args.topic, p) for p in sorted(assigned)]
    got = consumer.committed(parts, timeout=20) if parts else []
    emit({"type": "committed", "offsets": {str(tp.partition): tp.offset for tp in got}})
    consumer.close()


if __name__ == "__main__":
    main()
