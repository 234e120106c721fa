"""Test-bed driver for python confluent-kafka (librdkafka), the Debian package python3-confluent-kafka.

Run with /usr/bin/python3. Prints one JSON object per line on stdout, like the Java driver, and
uses the bed's record convention: record i has key "key-i" and value "value-i".

  produce --bootstrap B --topic T --count N [--start S]
  consume --bootstrap B --topic T --group G --max N [--timeout-ms MS]
  committed --bootstrap B --topic T --group G
Common: --sasl-mechanism M --username U --password P
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class ClientFailed(Exception):
    pass


# librdkafka retries failed authentication forever (it may be a transient broker-side problem);
# the driver gives up at once instead, so a test sees the reason, not a timeout. Unreachable brokers
# are waited for: tests restart brokers and proxies under running clients.
FATAL_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
client_errors = []


def on_error(err):
    if err.fatal() or err.code() in FATAL_CODES:
        client_errors.append(err)


def check_client_errors():
    if client_errors:
        raise ClientFailed(str(client_errors[0]))


def common(args):
    conf = {
        "bootstrap.servers": args.bootstrap,
        "client.id": "bed-python",
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 1000,
        "error_cb": on_error,
    }
    if args.sasl_mechanism:
        conf.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": args.sasl_mechanism,
                "sasl.username": args.username,
                "sasl.password": args.password,
            }
        )
    return conf


def consumer_conf(args):
    conf = common(args)
    conf.update(
        {
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            # Commits are explicit and synchronous: nothing is committed that was not returned.
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
        }
    )
    return conf


def produce(args):
    failures = []
    partitions = set()

    def on_delivery(err, msg):
        if err is not None:
            failures.append(str(err))
        else:
            partitions.add(msg.partition())

    producer = Producer(dict(common(args), **{"acks": "all", "linger.ms": 5, "enable.idempotence": True}))
    for i in range(args.start, args.start + args.count):
        while True:
            try:
                producer.produce(args.topic, key="key-%d" % i, value="value-%d" % i, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)  # local queue full: let deliveries drain
        producer.poll(0)
        check_client_errors()
    deadline = time.time() + 60
    remaining = len(producer)
    while remaining and time.time() < deadline:
        remaining = producer.flush(0.2)
        check_client_errors()
    if remaining:
        failures.append("%d records not delivered within 60 s" % remaining)
    if failures:
        raise RuntimeError("; ".join(failures[:5]))
    emit({"type": "produced", "topic": args.topic, "count": args.count, "partitions": sorted(partitions)})


def committed_offsets(consumer, topic, assignment):
    partitions = assignment or [
        TopicPartition(topic, p) for p in consumer.list_topics(topic, timeout=15).topics[topic].partitions
    ]
    out = []
    for tp in consumer.committed(partitions, timeout=15):
        if tp.offset >= 0:
            out.append({"topic": tp.topic, "partition": tp.partition, "offset": tp.offset})
    out.sort(key=lambda o: (o["topic"], o["partition"]))
    return out


def consume(args):
    consumer = Consumer(consumer_conf(args))
    consumer.subscribe([args.topic])
    deadline = time.time() + args.timeout_ms / 1000.0
    count = 0
    try:
        while count < args.max and time.time() < deadline:
            processed = {}
            batch = consumer.consume(num_messages=500, timeout=0.1)
            check_client_errors()
            for msg in batch:
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(msg.error())
                if count >= args.max:
                    break  # fetched beyond --max: neither returned nor committed
                key = msg.key()
                value = msg.value()
                emit(
                    {
                        "type": "record",
                        "topic": msg.topic(),
                        "partition": msg.partition(),
                        "offset": msg.offset(),
                        "key": None if key is None else key.decode("utf-8"),
                        "value": None if value is None else value.decode("utf-8"),
                    }
                )
                count += 1
                processed[(msg.topic(), msg.partition())] = msg.offset() + 1
            if processed:
                offsets = [TopicPartition(t, p, o) for (t, p), o in processed.items()]
                consumer.commit(offsets=offsets, asynchronous=False)
        committed = committed_offsets(consumer, args.topic, consumer.assignment())
    finally:
        consumer.close()
    emit({"type": "committed", "offsets": committed})
    emit({"type": "done", "count": count, "timedOut": count < args.max})


def committed(args):
    consumer = Consumer(consumer_conf(args))
    try:
        emit({"type": "committed", "offsets": committed_offsets(consumer, args.topic, None)})
    finally:
        consumer.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["produce", "consume", "committed"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--max", type=int, default=2**31 - 1)
    parser.add_argument("--timeout-ms", type=int, default=30000)
    parser.add_argument("--sasl-mechanism")
    parser.add_argument("--username")
    parser.add_argument("--password")
    args = parser.parse_args()
    try:
        {"produce": produce, "consume": consume, "committed": committed}[args.command](args)
    except Exception as e:  # reported as JSON so the TypeScript side can show it
        emit({"type": "error", "error": type(e).__name__, "message": str(e)})
        sys.exit(1)


if __name__ == "__main__":
    main()
