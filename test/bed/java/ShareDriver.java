import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Test-bed driver for share groups (KIP-932): KafkaShareConsumer, which only Kafka 4.x clients
 * have, so it is compiled apart from Driver (which also builds against 3.9) but with it, and
 * borrows its argument parsing, JSON output and connection settings. Output is one JSON object per
 * line on stdout, as Driver's.
 *
 * Usage:
 *   consume --bootstrap B --topic T --group G [--consumers C] [--ack implicit|accept|cycle|release]
 *           [--expect-deliveries D | --expect-distinct K] [--quiet-ms Q] [--timeout-ms MS]
 *           [--sigkill-when-acquired]
 *     C share consumers (one thread each, each its own member) poll until D records were delivered
 *     in all (or K distinct keys, when records may come again), then Q ms more (whatever arrives
 *     then is reported too), or until the timeout.
 *     --ack: implicit acknowledgement, or explicit: accept every record; cycle (record i: i%3==0
 *     accept, 1 release on its first delivery and accept it later, 2 reject); release every
 *     delivery (until the broker's delivery count limit archives it).
 *     --sigkill-when-acquired: the first consumer to get records reports them, acknowledges none,
 *     and the process SIGKILLs itself (records held, as by a consumer that crashed).
 *   group-config --bootstrap B --group G --configs k=v[,k=v]   (incrementalAlterConfigs SET)
 *   warmup
 */
public final class ShareDriver {
  private ShareDriver() {}

  public static void main(String[] argv) {
    Driver.runCommand(() -> {
      if (argv.length == 0) throw new IllegalArgumentException("missing command");
      Driver.Args args = Driver.Args.parse(argv, 1);
      switch (argv[0]) {
        case "consume" -> consume(args);
        case "group-config" -> groupConfig(args);
        case "warmup" -> warmup();
        default -> throw new IllegalArgumentException("unknown command: " + argv[0]);
      }
    });
  }

  static Properties shareProps(Driver.Args args, String ackMode) {
    Properties p = Driver.common(args);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, args.required("group"));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, ackMode);
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
    return p;
  }

  /** The explicit acknowledgement of one delivery under rule `ack`, or null for implicit. */
  static AcknowledgeType decide(String ack, ConsumerRecord<String, String> r, int deliveryCount) {
    switch (ack) {
      case "implicit":
        return null;
      case "accept":
        return AcknowledgeType.ACCEPT;
      case "release":
        return AcknowledgeType.RELEASE;
      case "cycle": {
        int i = Integer.parseInt(r.key().substring(r.key().indexOf('-') + 1));
        if (i % 3 == 0) return AcknowledgeType.ACCEPT;
        if (i % 3 == 2) return AcknowledgeType.REJECT;
        return deliveryCount <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
      }
      default:
        throw new IllegalArgumentException("--ack implicit|accept|cycle|release");
    }
  }

  static void consume(Driver.Args args) throws Exception {
    String topic = args.required("topic");
    int consumers = args.intValue("consumers", 1);
    String ack = args.optional("ack", "implicit");
    int expect = args.intValue("expect-deliveries", Integer.MAX_VALUE);
    int expectDistinct = args.intValue("expect-distinct", Integer.MAX_VALUE);
    // Keys delivered, for --expect-distinct (records delivered again count once).
    java.util.Set<String> distinct = java.util.concurrent.ConcurrentHashMap.newKeySet();
    int quietMs = args.intValue("quiet-ms", 0);
    boolean sigkill = args.flag("sigkill-when-acquired");
    long deadline = System.currentTimeMillis() + args.intValue("timeout-ms", 60_000);
    if (!List.of("implicit", "accept", "cycle", "release").contains(ack)) throw new IllegalArgumentException("--ack implicit|accept|cycle|release");
    AtomicInteger deliveries = new AtomicInteger();
    // When the expected deliveries were reached: polling goes on for quiet-ms after it.
    long[] reachedAt = {0};
    AtomicBoolean stop = new AtomicBoolean();
    List<Thread> threads = new ArrayList<>();
    List<Throwable> failures = new ArrayList<>();
    for (int c = 0; c < consumers; c++) {
      final int id = c;
      Thread t = new Thread(() -> {
        Properties props = shareProps(args, ack.equals("implicit") ? "implicit" : "explicit");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "bed-share-" + id);
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
          consumer.subscribe(List.of(topic));
          while (!stop.get() && System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
            if (sigkill && !batch.isEmpty()) {
              for (ConsumerRecord<String, String> r : batch) emitDelivery(id, r, "held");
              sigkillSelf();
            }
            for (ConsumerRecord<String, String> r : batch) {
              int count = r.deliveryCount().map(Short::intValue).orElse(-1);
              AcknowledgeType type = decide(ack, r, count);
              if (type != null) consumer.acknowledge(r, type);
              emitDelivery(id, r, type == null ? "implicit" : type.name());
              deliveries.incrementAndGet();
              distinct.add(r.key());
            }
            if (!batch.isEmpty() && explicit(ack)) consumer.commitSync(Duration.ofSeconds(30));
            synchronized (reachedAt) {
              boolean reached = deliveries.get() >= expect || distinct.size() >= expectDistinct;
              if (reachedAt[0] == 0 && reached) reachedAt[0] = System.currentTimeMillis();
              if (reachedAt[0] != 0 && System.currentTimeMillis() - reachedAt[0] >= quietMs) stop.set(true);
            }
          }
          // Implicit acknowledgements of the last batch are sent by commitSync (close would too).
          consumer.commitSync(Duration.ofSeconds(30));
        } catch (Throwable e) {
          synchronized (failures) {
            failures.add(e);
          }
          e.printStackTrace(System.err);
          stop.set(true);
        }
      }, "share-consumer-" + id);
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) t.join();
    if (!failures.isEmpty()) throw new RuntimeException("a share consumer failed: " + failures.get(0), failures.get(0));
    boolean timedOut = (expect != Integer.MAX_VALUE && deliveries.get() < expect)
        || (expectDistinct != Integer.MAX_VALUE && distinct.size() < expectDistinct);
    Driver.emit(new Driver.Json().put("type", "done").put("deliveries", deliveries.get()).put("timedOut", timedOut));
  }

  /** Explicit acknowledgements are committed after each batch; implicit ones ride on the next poll. */
  static boolean explicit(String ack) {
    return !ack.equals("implicit");
  }

  static void emitDelivery(int consumer, ConsumerRecord<String, String> r, String ack) {
    Driver.emit(new Driver.Json().put("type", "record").put("consumer", consumer).put("topic", r.topic()).put("partition", r.partition()).put("offset", r.offset()).put("key", r.key()).put("value", r.value()).put("deliveryCount", r.deliveryCount().map(Short::intValue).orElse(-1)).put("ack", ack));
  }

  /** Dies as a crashed consumer does: no acknowledgement, no leave, no close of its connections. */
  static void sigkillSelf() throws Exception {
    System.out.flush();
    new ProcessBuilder("kill", "-9", String.valueOf(ProcessHandle.current().pid())).inheritIO().start().waitFor();
    Thread.sleep(60_000); // the signal arrives first
    throw new IllegalStateException("still alive after kill -9");
  }

  static void groupConfig(Driver.Args args) throws Exception {
    String group = args.required("group");
    Collection<AlterConfigOp> ops = new ArrayList<>();
    for (String kv : args.required("configs").split(",")) {
      String[] parts = kv.split("=", 2);
      ops.add(new AlterConfigOp(new ConfigEntry(parts[0], parts[1]), AlterConfigOp.OpType.SET));
    }
    try (Admin admin = Admin.create(Driver.common(args))) {
      admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops)).all().get(30, TimeUnit.SECONDS);
    }
    Driver.emit(new Driver.Json().put("type", "configured").put("group", group));
  }

  /** Loads the share consumer's classes without a broker, for the class-data-sharing archive. */
  static void warmup() {
    Driver.Args args = Driver.Args.parse(new String[] {"--bootstrap", "127.0.0.1:9", "--group", "warmup"}, 0);
    try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(shareProps(args, "explicit"))) {
      consumer.subscribe(List.of("warmup"));
      consumer.poll(Duration.ofMillis(50));
      consumer.close(Duration.ZERO);
    }
    try (Admin admin = Admin.create(Driver.common(args))) {
      admin.describeCluster();
      admin.close(Duration.ZERO);
    }
    Driver.emit(new Driver.Json().put("type", "warmup").put("ok", true));
  }
}
