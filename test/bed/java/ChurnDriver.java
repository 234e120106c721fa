import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Test-bed driver for a churning KIP-848 group, after franz-go's ETL group tests: many members of
 * one group (group.protocol=consumer) joining and leaving in waves while records are produced,
 * each member committing in every way a consumer does at once: auto-commit at a short interval,
 * commitAsync after every batch, commitSync every few batches and for the partitions being revoked
 * (so commits race the heartbeats that move the member's epoch). Borrows Driver's helpers; output
 * is one JSON object per line on stdout, as Driver's.
 *
 * Usage:
 *   churn --bootstrap B --topic T --group G --records C [--slots N] [--waves W] [--wave-ms M]
 *         [--auto-commit-ms A] [--timeout-ms MS]
 *     C records are produced (key "key-i") evenly over the W waves of M ms. N member slots; in wave
 *     k slot i runs a member unless (i + k) % 3 == 0, so a third of the members leave (close) and
 *     the others (re)join at every wave; after the waves every slot runs one until every record
 *     produced was processed, then all close. The last line, "done", has the records produced and
 *     processed, the commits that failed by exception (as the client saw them), and the group's
 *     committed offsets against the end offsets.
 *   warmup
 */
public final class ChurnDriver {
  private ChurnDriver() {}

  public static void main(String[] argv) {
    Driver.runCommand(() -> {
      if (argv.length == 0) throw new IllegalArgumentException("missing command");
      Driver.Args args = Driver.Args.parse(argv, 1);
      switch (argv[0]) {
        case "churn" -> churn(args);
        case "warmup" -> warmup();
        default -> throw new IllegalArgumentException("unknown command: " + argv[0]);
      }
    });
  }

  /** What the slots share: the schedule, what was produced and processed, the failures seen. */
  static final class Run {
    final long start = System.currentTimeMillis();
    final int waves;
    final int waveMs;
    final AtomicBoolean produced = new AtomicBoolean();
    final AtomicBoolean finished = new AtomicBoolean();
    /** End offset of every partition written, once production is over. */
    final Map<Integer, Long> ends = new ConcurrentHashMap<>();
    /** "partition:offset" of every record processed (by any member, any number of times). */
    final Set<String> processed = ConcurrentHashMap.newKeySet();
    /** Highest processed offset + 1 by partition. */
    final Map<Integer, Long> reached = new ConcurrentHashMap<>();
    final Map<String, AtomicInteger> failures = new ConcurrentHashMap<>();
    final AtomicInteger members = new AtomicInteger();

    Run(int waves, int waveMs) {
      this.waves = waves;
      this.waveMs = waveMs;
    }

    boolean slotOn(int slot) {
      long k = (System.currentTimeMillis() - start) / waveMs;
      return k >= waves || (slot + k) % 3 != 0;
    }

    void failed(String how, Exception e) {
      failures.computeIfAbsent(how + ":" + e.getClass().getSimpleName(), x -> new AtomicInteger()).incrementAndGet();
    }

    boolean allProcessed() {
      if (!produced.get()) return false;
      for (var e : ends.entrySet()) if (reached.getOrDefault(e.getKey(), 0L) < e.getValue()) return false;
      return true;
    }
  }

  static void churn(Driver.Args args) throws Exception {
    String topic = args.required("topic");
    String group = args.required("group");
    int records = args.intValue("records", 3000);
    int slots = args.intValue("slots", 8);
    Run run = new Run(args.intValue("waves", 6), args.intValue("wave-ms", 4000));
    long deadline = run.start + args.intValue("timeout-ms", 120_000);
    Thread producer = new Thread(() -> produce(args, topic, records, run));
    producer.start();
    Thread[] threads = new Thread[slots];
    for (int i = 0; i < slots; i++) {
      int slot = i;
      threads[i] = new Thread(() -> slot(args, topic, group, slot, run, deadline));
      threads[i].start();
    }
    while (System.currentTimeMillis() < deadline && !run.allProcessed()) Thread.sleep(100);
    run.finished.set(true);
    producer.join();
    for (Thread t : threads) t.join();
    Map<TopicPartition, OffsetAndMetadata> committed;
    try (Admin admin = Admin.create(Driver.common(args))) {
      committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    }
    Driver.Json committedJson = new Driver.Json();
    Driver.Json endsJson = new Driver.Json();
    new TreeMap<>(run.ends).forEach((p, end) -> {
      endsJson.put(String.valueOf(p), end);
      OffsetAndMetadata c = committed.get(new TopicPartition(topic, p));
      committedJson.put(String.valueOf(p), c == null ? -1 : c.offset());
    });
    Driver.Json failures = new Driver.Json();
    new TreeMap<>(run.failures).forEach((k, v) -> failures.put(k, v.get()));
    Driver.emit(new Driver.Json().put("type", "done").put("produced", records).put("processed", run.processed.size())
        .put("members", run.members.get()).put("timedOut", !run.allProcessed()).put("commitFailures", failures)
        .put("committed", committedJson).put("ends", endsJson));
  }

  /** Produces `records` records evenly over the waves, then notes every partition's end offset. */
  static void produce(Driver.Args args, String topic, int records, Run run) {
    Properties p = Driver.common(args);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    Map<Integer, Long> ends = new HashMap<>();
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      long span = (long) run.waves * run.waveMs;
      for (int i = 0; i < records; i++) {
        long due = run.start + span * i / records;
        long wait = due - System.currentTimeMillis();
        if (wait > 0) Thread.sleep(wait);
        RecordMetadata md = producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)).get();
        ends.merge(md.partition(), md.offset() + 1, Math::max);
      }
    } catch (Exception e) {
      Driver.emit(new Driver.Json().put("type", "produce-error").put("error", e.toString()));
      return;
    }
    run.ends.putAll(ends);
    run.produced.set(true);
  }

  /** One member slot: runs a member whenever the schedule has the slot on, until the run ends. */
  static void slot(Driver.Args args, String topic, String group, int slot, Run run, long deadline) {
    while (!run.finished.get() && System.currentTimeMillis() < deadline) {
      if (!run.slotOn(slot)) {
        sleep(50);
        continue;
      }
      try {
        member(args, topic, group, slot, run);
      } catch (Exception e) {
        run.failed("member", e);
      }
    }
  }

  /** One member's life: from its join until the schedule turns its slot off or the run ends. */
  static void member(Driver.Args args, String topic, String group, int slot, Run run) {
    // KIP-848: the caller passes --protocol consumer, so that Driver's settings leave out the
    // session and heartbeat settings the broker owns under it.
    Properties props = Driver.consumerProps(args, group);
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-slot-" + slot);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
    props.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, args.optional("auto-commit-ms", "100"));
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
    run.members.incrementAndGet();
    Map<TopicPartition, OffsetAndMetadata> done = new ConcurrentHashMap<>();
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
          Map<TopicPartition, OffsetAndMetadata> revoked = new HashMap<>();
          for (TopicPartition tp : partitions) if (done.containsKey(tp)) revoked.put(tp, done.remove(tp));
          if (revoked.isEmpty()) return;
          try {
            consumer.commitSync(revoked);
          } catch (Exception e) {
            run.failed("revoke", e);
          }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
      });
      int batches = 0;
      while (!run.finished.get() && run.slotOn(slot)) {
        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(50));
        if (batch.isEmpty()) continue;
        for (ConsumerRecord<String, String> r : batch) {
          run.processed.add(r.partition() + ":" + r.offset());
          run.reached.merge(r.partition(), r.offset() + 1, Math::max);
          done.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        // Only what is still assigned: a revoked partition was committed by the listener.
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : consumer.assignment()) if (done.containsKey(tp)) offsets.put(tp, done.get(tp));
        if (offsets.isEmpty()) continue;
        if (++batches % 4 == 0) {
          try {
            consumer.commitSync(offsets, Duration.ofSeconds(10));
          } catch (Exception e) {
            run.failed("sync", e);
          }
        } else {
          consumer.commitAsync(offsets, (o, e) -> {
            if (e != null) run.failed("async", e);
          });
        }
        // A little processing time: the member holds its records while others come and go.
        sleep(10);
      }
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static void warmup() {
    Driver.Args args = Driver.Args.parse(new String[] {"--bootstrap", "127.0.0.1:9", "--protocol", "consumer"}, 0);
    Properties props = Driver.consumerProps(args, "warmup");
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of("warmup"));
      consumer.poll(Duration.ofMillis(50));
      consumer.close(Duration.ZERO);
    }
    Driver.emit(new Driver.Json().put("type", "warmup").put("ok", true));
  }
}
