"""What the bed's committing librdkafka members share (python confluent-kafka).

outage_consumer.py and test/reliability/chaos_consumer.py are group members that commit
synchronously on and on through the proxy; this module holds their common ground: the arguments
that name the cluster, topic and group, the consumer settings that make a member reconnect and
rejoin quickly (session.timeout.ms 10000, short reconnect backoff, no auto-commit), one JSON line
per event on stdout, and a synchronous commit that reports a refused partition as a failure.
"""

import argparse
import json
import sys

from confluent_kafka import Consumer, KafkaException


def member_args(description=None):
    """A parser with --bootstrap, --topic and --group; the caller adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    return p


def committing_consumer(args, client_id, extra=None):
    """A member of args.group with the shared settings, plus `extra` (librdkafka's names).

    With "group.protocol": "consumer" in `extra` (KIP-848, librdkafka 2.4 or later) the shared
    session.timeout.ms is left out: the session is then the broker's (its
    group.consumer.session.timeout.ms or the group's consumer.session.timeout.ms), and librdkafka
    refuses a client-side one.
    """
    extra = extra or {}
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": client_id,
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 1000,
    }
    if extra.get("group.protocol") == "consumer":
        del conf["session.timeout.ms"]
    conf.update(extra)
    return Consumer(conf)


def emit(obj):
    """One event: a JSON object on its own line, flushed at once (the runner reads it live)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def commit_sync(consumer, offsets):
    """Commits `offsets` synchronously: None when every partition took it, else the error's name."""
    try:
        result = consumer.commit(offsets=offsets, asynchronous=False)
        errs = [tp.error for tp in (result or []) if tp.error is not None]
        if errs:
            raise KafkaException(errs[0])
        return None
    except KafkaException as e:
        err = e.args[0]
        return err.name() if hasattr(err, "name") else str(err)
