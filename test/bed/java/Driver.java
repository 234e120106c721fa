import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
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
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Test-bed driver for the official Java client. Plain Java 17 with kafka-clients only, so the bed
 * can compile it with javac against whichever Kafka version it runs (3.9 and 4.x share every API
 * used here). Output is one JSON object per line on stdout; anything else (client logs) goes to
 * stderr, so the TypeScript side can parse stdout line by line.
 *
 * Record i of a produce run has key "key-i" and value "value-i": every client helper of the bed
 * uses the same convention, so a test can check that exactly the expected records arrived.
 *
 * Usage:
 *   produce  --bootstrap B --topic T --count N [--start S] [--transactional-id ID] [--abort]
 *            [--batch-size BYTES] [--value-bytes N] (value "value-i|" padded to N characters)
 *   consume  --bootstrap B --topic T --group G --max N [--commit sync|async|auto]
 *            [--protocol classic|consumer] [--timeout-ms MS] [--isolation read_committed]
 *            [--session-timeout-ms MS (classic only; default 10000)]
 *            [--until-stop [--commit-interval-ms MS] [--commit-timeout-ms MS]]
 *   transform --bootstrap B --input T1 --output T2 --group G --transactional-id ID --max N
 *            [--protocol classic|consumer] [--timeout-ms MS] [--abort-first]
 *   warmup   (loads the client classes without a broker, to record a class-data-sharing archive)
 *   admin describe-cluster | group-offsets --group G | create-topic --topic T [--partitions P]
 *            [--replication-factor R] | delete-group --group G | list-groups | describe-group --group G
 *            (the admin commands are in DriverAdmin.java)
 * Common: --sasl-mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 --username U --password P
 */
public final class Driver {
  private Driver() {}

  public static void main(String[] argv) {
    runCommand(() -> {
      if (argv.length == 0) throw new IllegalArgumentException("missing command");
      String command = argv[0];
      int rest = 1;
      if (command.equals("admin")) {
        if (argv.length < 2) throw new IllegalArgumentException("missing admin subcommand");
        command = "admin " + argv[1];
        rest = 2;
      }
      Args args = Args.parse(argv, rest);
      switch (command) {
        case "produce" -> produce(args);
        case "consume" -> consume(args);
        case "transform" -> transform(args);
        case "warmup" -> warmup();
        case "admin describe-cluster" -> DriverAdmin.describeCluster(args);
        case "admin group-offsets" -> DriverAdmin.groupOffsets(args);
        case "admin create-topic" -> DriverAdmin.createTopic(args);
        case "admin delete-group" -> DriverAdmin.deleteGroup(args);
        case "admin list-groups" -> DriverAdmin.listGroups(args);
        case "admin describe-group" -> DriverAdmin.describeGroup(args);
        default -> throw new IllegalArgumentException("unknown command: " + command);
      }
    });
  }

  interface Command {
    void run() throws Exception;
  }

  /**
   * Runs a program's command and exits: 0, or 1 after an `error` line (and the stack trace on
   * stderr). Every program of the bed ends this way.
   */
  static void runCommand(Command command) {
    int status = 0;
    try {
      command.run();
    } catch (Throwable e) {
      emit(new Json().put("type", "error").put("error", e.getClass().getName()).put("message", String.valueOf(e.getMessage())));
      e.printStackTrace(System.err);
      status = 1;
    }
    System.out.flush();
    // Client threads (e.g. a producer's sender after a failure) must not keep the JVM alive.
    System.exit(status);
  }

  // ---------------------------------------------------------------- produce

  /** Record i's value of `bytes` characters: "value-i|" then one letter repeated (types.ts paddedRecordValue). */
  static String paddedValue(int i, int bytes) {
    StringBuilder b = new StringBuilder(bytes).append("value-").append(i).append('|');
    char fill = (char) ('a' + i % 26);
    while (b.length() < bytes) b.append(fill);
    return b.toString();
  }

  static void produce(Args args) throws Exception {
    String topic = args.required("topic");
    int count = args.intValue("count", 1);
    int start = args.intValue("start", 0);
    String txId = args.optional("transactional-id");
    boolean abort = args.flag("abort");
    int batchSize = args.intValue("batch-size", 0);
    int valueBytes = args.intValue("value-bytes", 0);
    Properties props = common(args);
    if (batchSize > 0) props.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(batchSize));
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    if (txId != null) props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txId);

    // partition -> [first offset, last offset, count]
    Map<Integer, long[]> perPartition = new TreeMap<>();
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
      if (txId != null) {
        producer.initTransactions();
        producer.beginTransaction();
      }
      List<java.util.concurrent.Future<RecordMetadata>> sends = new ArrayList<>(count);
      for (int i = start; i < start + count; i++) {
        String value = valueBytes > 0 ? paddedValue(i, valueBytes) : "value-" + i;
        sends.add(producer.send(new ProducerRecord<>(topic, "key-" + i, value)));
      }
      producer.flush();
      for (var send : sends) {
        RecordMetadata md = send.get(60, TimeUnit.SECONDS);
        long[] s = perPartition.computeIfAbsent(md.partition(), p -> new long[] {Long.MAX_VALUE, -1, 0});
        s[0] = Math.min(s[0], md.offset());
        s[1] = Math.max(s[1], md.offset());
        s[2]++;
      }
      if (txId != null) {
        if (abort) producer.abortTransaction();
        else producer.commitTransaction();
      }
    }
    List<Json> parts = new ArrayList<>();
    perPartition.forEach((p, s) -> parts.add(new Json().put("partition", p).put("firstOffset", s[0]).put("lastOffset", s[1]).put("count", s[2])));
    emit(new Json().put("type", "produced").put("topic", topic).put("count", count).put("aborted", txId != null && abort).put("partitions", parts));
  }

  // ---------------------------------------------------------------- consume

  static void consume(Args args) throws Exception {
    if (args.flag("until-stop")) {
      consumeUntilStop(args);
      return;
    }
    String topic = args.required("topic");
    String group = args.required("group");
    int max = args.intValue("max", Integer.MAX_VALUE);
    String commit = args.optional("commit", "sync");
    long deadline = System.currentTimeMillis() + args.intValue("timeout-ms", 30_000);
    Properties props = consumerProps(args, group);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, String.valueOf(commit.equals("auto")));
    if (commit.equals("auto")) props.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "200");
    if (!Set.of("sync", "async", "auto").contains(commit)) throw new IllegalArgumentException("--commit sync|async|auto");

    int consumed = 0;
    List<String> asyncErrors = new ArrayList<>();
    int[] asyncPending = {0};
    Map<TopicPartition, OffsetAndMetadata> committed;
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic), new AssignmentReporter());
      while (consumed < max && System.currentTimeMillis() < deadline) {
        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
        if (batch.isEmpty()) continue;
        // Records past --max are not processed; the position is rewound to the first of them so
        // that neither the commit below nor an auto-commit on close can skip them.
        Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
        Map<TopicPartition, Long> rewind = new HashMap<>();
        for (ConsumerRecord<String, String> r : batch) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          if (consumed >= max) {
            rewind.putIfAbsent(tp, r.offset());
            continue;
          }
          emitRecord(r);
          consumed++;
          processed.put(tp, new OffsetAndMetadata(r.offset() + 1));
        }
        rewind.forEach(consumer::seek);
        if (processed.isEmpty()) continue;
        if (commit.equals("sync")) {
          consumer.commitSync(processed);
        } else if (commit.equals("async")) {
          asyncPending[0]++;
          consumer.commitAsync(processed, (offsets, error) -> {
            asyncPending[0]--;
            if (error != null) asyncErrors.add(error.toString());
          });
        }
      }
      if (commit.equals("async")) {
        // Async commit callbacks run inside poll(); keep polling (with fetching paused, so the
        // position does not move) until every commit has been acknowledged.
        consumer.pause(consumer.assignment());
        long until = System.currentTimeMillis() + 15_000;
        while (asyncPending[0] > 0 && System.currentTimeMillis() < until) consumer.poll(Duration.ofMillis(50));
        if (asyncPending[0] > 0) asyncErrors.add(asyncPending[0] + " async commits unacknowledged");
      } else if (commit.equals("auto")) {
        // Make the final auto-commit explicit rather than relying on close(): commitSync() with no
        // arguments commits exactly what auto-commit would, the current positions.
        consumer.commitSync();
      }
      committed = consumer.committed(consumer.assignment(), Duration.ofSeconds(15));
    }
    emitCommitted(committed);
    emit(new Json().put("type", "done").put("count", consumed).put("timedOut", consumed < max && max != Integer.MAX_VALUE).put("commitErrors", asyncErrors));
  }

  /**
   * consume --until-stop: a group member that runs until a line "stop" arrives on stdin or stdin
   * ends, for the store-outage tests. It consumes on and on (records are not printed) and every
   * --commit-interval-ms commits the position after the last record of every partition it has
   * consumed, synchronously with --commit-timeout-ms: each commit is one "commit" line (ok, or the
   * exception and whether it is retriable; a failed commit never ends the run). A "member" line
   * reports the member id and generation (the member epoch under KIP-848) whenever they change.
   * Rebalance callbacks are "assigned", "revoked" and "lost" lines. After "stop": a "committed"
   * line (what the coordinator has for the assignment), then close and "done".
   */
  static void consumeUntilStop(Args args) throws Exception {
    String topic = args.required("topic");
    String group = args.required("group");
    int interval = args.intValue("commit-interval-ms", 200);
    Duration commitTimeout = Duration.ofMillis(args.intValue("commit-timeout-ms", 1500));
    Properties props = consumerProps(args, group);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    // "stop" on stdin, or its end (the test is gone), ends the run.
    java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
    Thread stdinReader = new Thread(() -> {
      try (java.io.BufferedReader stdin = new java.io.BufferedReader(new java.io.InputStreamReader(System.in))) {
        String line;
        while ((line = stdin.readLine()) != null && !line.trim().equals("stop")) {
          // other lines are ignored
        }
      } catch (java.io.IOException e) {
        // as at the end of stdin
      }
      stop.set(true);
    });
    stdinReader.setDaemon(true);
    stdinReader.start();
    Map<TopicPartition, OffsetAndMetadata> consumed = new TreeMap<>(Comparator.comparing(TopicPartition::partition));
    Map<TopicPartition, OffsetAndMetadata> committed;
    long commits = 0;
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic), new AssignmentReporter());
      String member = "";
      long nextCommit = 0;
      // A safety net only: the test says "stop" (or kills the process) long before.
      long deadline = System.currentTimeMillis() + args.intValue("timeout-ms", 600_000);
      while (System.currentTimeMillis() < deadline && !stop.get()) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(50))) {
          consumed.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        var meta = consumer.groupMetadata();
        String now = meta.memberId() + "/" + meta.generationId();
        if (!now.equals(member)) {
          member = now;
          emit(new Json().put("type", "member").put("memberId", meta.memberId()).put("generation", meta.generationId()).put("t", System.currentTimeMillis()));
        }
        if (consumed.isEmpty() || System.currentTimeMillis() < nextCommit) continue;
        // Only partitions still assigned: a revoked one is another member's to commit.
        Map<TopicPartition, OffsetAndMetadata> offsets = new TreeMap<>(Comparator.comparing(TopicPartition::partition));
        for (TopicPartition tp : consumer.assignment()) if (consumed.containsKey(tp)) offsets.put(tp, consumed.get(tp));
        if (offsets.isEmpty()) continue;
        Json line = new Json().put("type", "commit").put("n", ++commits).put("offsets", offsetsJson(offsets));
        long started = System.currentTimeMillis();
        try {
          consumer.commitSync(offsets, commitTimeout);
          line.put("ok", true);
        } catch (Exception e) {
          line.put("ok", false).put("error", e.getClass().getName()).put("retriable", e instanceof RetriableException).put("message", String.valueOf(e.getMessage()));
        }
        long ended = System.currentTimeMillis();
        emit(line.put("ms", ended - started).put("started", started).put("t", ended));
        nextCommit = ended + interval;
      }
      committed = consumer.committed(consumer.assignment(), Duration.ofSeconds(30));
    }
    emitCommitted(committed);
    emit(new Json().put("type", "done").put("commits", commits));
  }

  static List<Json> offsetsJson(Map<TopicPartition, OffsetAndMetadata> offsets) {
    List<Json> out = new ArrayList<>();
    offsets.forEach((tp, o) -> out.add(new Json().put("partition", tp.partition()).put("offset", o.offset())));
    return out;
  }

  // ---------------------------------------------------------------- transform (exactly-once)

  /** Read-process-write: consumes --input, produces upper-cased values to --output, and commits the
   *  consumer offsets inside the producer transaction (sendOffsetsToTransaction). */
  static void transform(Args args) throws Exception {
    String input = args.required("input");
    String output = args.required("output");
    String group = args.required("group");
    String txId = args.required("transactional-id");
    int max = args.intValue("max", Integer.MAX_VALUE);
    boolean abortFirst = args.flag("abort-first");
    long deadline = System.currentTimeMillis() + args.intValue("timeout-ms", 30_000);

    Properties cprops = consumerProps(args, group);
    cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    Properties pprops = common(args);
    pprops.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    pprops.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    pprops.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txId);
    pprops.put(ProducerConfig.LINGER_MS_CONFIG, "5");

    int done = 0;
    int transactions = 0;
    int aborted = 0;
    Map<TopicPartition, OffsetAndMetadata> committed;
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cprops);
        KafkaProducer<String, String> producer = new KafkaProducer<>(pprops)) {
      producer.initTransactions();
      consumer.subscribe(List.of(input), new AssignmentReporter());
      boolean abortNext = abortFirst;
      while (done < max && System.currentTimeMillis() < deadline) {
        ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(100));
        if (batch.isEmpty()) continue;
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        Map<TopicPartition, Long> firstSeen = new HashMap<>();
        Map<TopicPartition, Long> rewind = new HashMap<>();
        producer.beginTransaction();
        int inTx = 0;
        for (ConsumerRecord<String, String> r : batch) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          firstSeen.putIfAbsent(tp, r.offset());
          if (done + inTx >= max) {
            rewind.putIfAbsent(tp, r.offset());
            continue;
          }
          String value = r.value() == null ? null : r.value().toUpperCase();
          producer.send(new ProducerRecord<>(output, r.key(), value));
          offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
          inTx++;
        }
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        if (abortNext) {
          producer.abortTransaction();
          abortNext = false;
          aborted++;
          // The aborted batch must be processed again: rewind to its first record.
          firstSeen.forEach(consumer::seek);
          emit(new Json().put("type", "transaction").put("outcome", "aborted").put("records", inTx));
          continue;
        }
        producer.commitTransaction();
        rewind.forEach(consumer::seek);
        transactions++;
        done += inTx;
        emit(new Json().put("type", "transaction").put("outcome", "committed").put("records", inTx));
      }
      committed = consumer.committed(consumer.assignment(), Duration.ofSeconds(15));
    }
    emitCommitted(committed);
    emit(new Json().put("type", "done").put("count", done).put("transactions", transactions).put("aborted", aborted).put("timedOut", done < max && max != Integer.MAX_VALUE));
  }

  // ---------------------------------------------------------------- warmup

  /** Creates (and at once closes) every kind of client the driver uses, against an address where
   *  nothing listens, so that a run with -XX:ArchiveClassesAtExit records their classes. */
  static void warmup() {
    Args args = Args.parse(new String[] {"--bootstrap", "127.0.0.1:9", "--group", "warmup"}, 0);
    Properties pp = common(args);
    pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "50"); // send() waits this long for metadata
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
      producer.send(new ProducerRecord<>("warmup", "k", "v"));
      producer.close(Duration.ZERO);
    }
    for (String protocol : List.of("classic", "consumer")) {
      Args cargs = Args.parse(new String[] {"--bootstrap", "127.0.0.1:9", "--protocol", protocol}, 0);
      try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(cargs, "warmup"))) {
        consumer.subscribe(List.of("warmup"), new AssignmentReporter());
        consumer.poll(Duration.ofMillis(50));
        consumer.close(Duration.ZERO);
      }
    }
    try (Admin admin = Admin.create(common(args))) {
      admin.describeCluster();
      admin.close(Duration.ZERO);
    }
    emit(new Json().put("type", "warmup").put("ok", true));
  }

  // ---------------------------------------------------------------- configuration

  /** Connection settings shared by producer, consumer and admin, tuned for a local broker. */
  static Properties common(Args args) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.required("bootstrap"));
    p.put(AdminClientConfig.CLIENT_ID_CONFIG, args.optional("client-id", "bed-java"));
    p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
    p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
    p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "50");
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    String mechanism = args.optional("sasl-mechanism");
    if (mechanism != null) {
      String module = mechanism.equals("PLAIN")
          ? "org.apache.kafka.common.security.plain.PlainLoginModule"
          : "org.apache.kafka.common.security.scram.ScramLoginModule";
      p.put("security.protocol", "SASL_PLAINTEXT");
      p.put("sasl.mechanism", mechanism);
      p.put("sasl.jaas.config", module + " required username=\"" + jaasEscape(args.required("username"))
          + "\" password=\"" + jaasEscape(args.required("password")) + "\";");
    }
    return p;
  }

  static Properties consumerProps(Args args, String group) {
    Properties p = common(args);
    String protocol = args.optional("protocol", "classic");
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, args.optional("offset-reset", "earliest"));
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args.optional("isolation", "read_uncommitted"));
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
    p.put("group.protocol", protocol);
    if (protocol.equals("classic")) {
      // The new protocol (KIP-848) rejects these client-side settings: the broker owns them.
      p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, args.optional("session-timeout-ms", "10000"));
      p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
    }
    return p;
  }

  static String jaasEscape(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"");
  }

  // ---------------------------------------------------------------- output

  /** Reports assignments on stdout so a test can see rebalances when it needs to. */
  static final class AssignmentReporter implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      emit(new Json().put("type", "assigned").put("partitions", tpList(partitions)).put("t", System.currentTimeMillis()));
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      if (!partitions.isEmpty()) emit(new Json().put("type", "revoked").put("partitions", tpList(partitions)).put("t", System.currentTimeMillis()));
    }

    /** Partitions lost without a revocation (the member was fenced or its session expired). */
    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      if (!partitions.isEmpty()) emit(new Json().put("type", "lost").put("partitions", tpList(partitions)).put("t", System.currentTimeMillis()));
    }
  }

  static List<Json> tpList(Collection<TopicPartition> partitions) {
    List<Json> out = new ArrayList<>();
    for (TopicPartition tp : partitions) out.add(new Json().put("topic", tp.topic()).put("partition", tp.partition()));
    return out;
  }

  static Json nodeJson(Node n) {
    return new Json().put("id", n.id()).put("host", n.host()).put("port", n.port());
  }

  static void emitRecord(ConsumerRecord<String, String> r) {
    emit(new Json().put("type", "record").put("topic", r.topic()).put("partition", r.partition()).put("offset", r.offset()).put("key", r.key()).put("value", r.value()));
  }

  static void emitCommitted(Map<TopicPartition, OffsetAndMetadata> committed) {
    List<Map.Entry<TopicPartition, OffsetAndMetadata>> entries = new ArrayList<>(committed.entrySet());
    entries.sort(Comparator.comparing((Map.Entry<TopicPartition, OffsetAndMetadata> e) -> e.getKey().topic())
        .thenComparingInt(e -> e.getKey().partition()));
    List<Json> offsets = new ArrayList<>();
    for (var e : entries) {
      // committed() maps partitions without a committed offset to null.
      if (e.getValue() != null) offsets.add(new Json().put("topic", e.getKey().topic()).put("partition", e.getKey().partition()).put("offset", e.getValue().offset()));
    }
    emit(new Json().put("type", "committed").put("offsets", offsets));
  }

  static synchronized void emit(Json json) {
    System.out.println(json);
  }

  /** Just enough JSON for flat objects, lists and scalars; no library on the classpath needed. */
  static final class Json {
    private final Map<String, Object> fields = new LinkedHashMap<>();

    Json put(String key, Object value) {
      fields.put(key, value);
      return this;
    }

    @Override
    public String toString() {
      StringBuilder sb = new StringBuilder();
      write(sb, this);
      return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
      if (v == null) {
        sb.append("null");
      } else if (v instanceof Json j) {
        sb.append('{');
        boolean first = true;
        for (var e : j.fields.entrySet()) {
          if (!first) sb.append(',');
          first = false;
          writeString(sb, e.getKey());
          sb.append(':');
          write(sb, e.getValue());
        }
        sb.append('}');
      } else if (v instanceof Collection<?> c) {
        sb.append('[');
        boolean first = true;
        for (Object o : c) {
          if (!first) sb.append(',');
          first = false;
          write(sb, o);
        }
        sb.append(']');
      } else if (v instanceof Number || v instanceof Boolean) {
        sb.append(v);
      } else {
        writeString(sb, v.toString());
      }
    }

    private static void writeString(StringBuilder sb, String s) {
      sb.append('"');
      for (int i = 0; i < s.length(); i++) {
        char ch = s.charAt(i);
        switch (ch) {
          case '"' -> sb.append("\\\"");
          case '\\' -> sb.append("\\\\");
          case '\n' -> sb.append("\\n");
          case '\r' -> sb.append("\\r");
          case '\t' -> sb.append("\\t");
          default -> {
            if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
            else sb.append(ch);
          }
        }
      }
      sb.append('"');
    }
  }

  /** --name value pairs and bare --flags. */
  static final class Args {
    private final Map<String, String> values = new HashMap<>();

    static Args parse(String[] argv, int from) {
      Args a = new Args();
      for (int i = from; i < argv.length; i++) {
        String arg = argv[i];
        if (!arg.startsWith("--")) throw new IllegalArgumentException("unexpected argument: " + arg);
        String name = arg.substring(2);
        if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) a.values.put(name, argv[++i]);
        else a.values.put(name, "true");
      }
      return a;
    }

    String required(String name) {
      String v = values.get(name);
      if (v == null) throw new IllegalArgumentException("missing --" + name);
      return v;
    }

    String optional(String name) {
      return values.get(name);
    }

    String optional(String name, String fallback) {
      return values.getOrDefault(name, fallback);
    }

    int intValue(String name, int fallback) {
      String v = values.get(name);
      return v == null ? fallback : Integer.parseInt(v);
    }

    boolean flag(String name) {
      return Boolean.parseBoolean(values.getOrDefault(name, "false"));
    }
  }
}
