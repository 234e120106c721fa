import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Test-bed Kafka Streams app: word count, as a user would write it, with the group protocol
 * (classic, or KIP-1071's streams) and the processing guarantee chosen by the test. Compiled apart
 * from Driver, with the kafka-streams jars, and borrows Driver's argument parsing, JSON output and
 * connection settings. Output is one JSON object per line on stdout, as Driver's.
 *
 * Usage:
 *   create-topics --bootstrap B --topics T1,T2,... [--partitions P]
 *   produce-lines --bootstrap B --topics T1,T2,... --file F
 *     Produces each line of F as one record into each topic (key: its line number, so the lines
 *     spread over the topic's partitions), idempotently, and waits until all are acknowledged.
 *   wordcount --bootstrap B --application-id A --input T --output O --state-dir D
 *             [--protocol classic|streams] [--guarantee at_least_once|exactly_once_v2]
 *             [--commit-interval-ms C] [--min-lines L] [--min-words W] [--quiet-ms Q] [--timeout-ms MS]
 *     Counts the words of T (lower case, split on non-word characters) into O (word -> count, a
 *     long). Stops once it has read at least L input lines and W words back from its repartition
 *     topic and then nothing new arrived for Q ms (or at the timeout), closes cleanly (which
 *     commits), and prints a `done` line. A stream thread that dies is counted (`threadDeaths`)
 *     and ends the app: the test must see it, not a restarted thread that hides it.
 *   wordcount-apps --bootstrap B --apps-file F --state-dir D [--commit-interval-ms C]
 *                  [--sigkill-after N] [--session-timeout-ms S] [--timeout-ms MS]
 *     One instance of each word-count app that F lists, one per line, tab-separated:
 *     application id, bootstrap, input, output, protocol, guarantee. All run in this process (the
 *     test starts one JVM per instance, not per app) until stdin closes (or the timeout), then
 *     close cleanly at once and print a `done` line with each app's figures. State and deaths
 *     lines name their app. D holds every app's state (Kafka Streams keeps each application id
 *     in a directory of its own), so a restarted instance gets its predecessor's.
 *     --sigkill-after N: once every app has processed N records (input lines plus words) here,
 *     the process SIGKILLs itself mid-stream: no commit, no leave, no close, a crash of every app.
 *     --session-timeout-ms S: each app's session timeout, so a crashed instance's tasks move on
 *     sooner than after the broker's 45 s default: the group config streams.session.timeout.ms
 *     (KIP-1071) for the streams protocol, the consumer's session.timeout.ms for the classic one.
 *   read-counts --bootstrap B --topics O1,O2,... [--timeout-ms MS]
 *     Reads each topic from the start to its end (read_committed, no group) and prints one line
 *     with the last count of each word of each topic.
 *   warmup
 */
public final class StreamsDriver {
  private StreamsDriver() {}

  public static void main(String[] argv) {
    Driver.runCommand(() -> {
      if (argv.length == 0) throw new IllegalArgumentException("missing command");
      Driver.Args args = Driver.Args.parse(argv, 1);
      switch (argv[0]) {
        case "create-topics" -> createTopics(args);
        case "produce-lines" -> produceLines(args);
        case "wordcount" -> wordcount(args);
        case "wordcount-apps" -> wordcountApps(args);
        case "read-counts" -> readCounts(args);
        case "warmup" -> Driver.emit(new Driver.Json().put("type", "warmup").put("ok", true));
        default -> throw new IllegalArgumentException("unknown command: " + argv[0]);
      }
    });
  }

  static List<String> topics(Driver.Args args) {
    return Arrays.asList(args.required("topics").split(","));
  }

  static void createTopics(Driver.Args args) throws Exception {
    int partitions = args.intValue("partitions", 1);
    List<NewTopic> wanted = new ArrayList<>();
    for (String topic : topics(args)) wanted.add(new NewTopic(topic, partitions, (short) 1));
    try (Admin admin = Admin.create(Driver.common(args))) {
      admin.createTopics(wanted).all().get(60, TimeUnit.SECONDS);
    }
    Driver.emit(new Driver.Json().put("type", "topics").put("count", wanted.size()));
  }

  static void produceLines(Driver.Args args) throws Exception {
    List<String> topics = topics(args);
    List<String> lines = Files.readAllLines(Path.of(args.required("file")));
    Properties p = Driver.common(args);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      List<Future<?>> sent = new ArrayList<>();
      for (int i = 0; i < lines.size(); i++) {
        for (String topic : topics) sent.add(producer.send(new ProducerRecord<>(topic, String.valueOf(i), lines.get(i))));
      }
      for (var f : sent) f.get(60, TimeUnit.SECONDS);
    }
    Driver.emit(new Driver.Json().put("type", "produced").put("count", lines.size()));
  }

  /** One word-count app of this process: its KafkaStreams and what it has processed. */
  static final class WordCountApp {
    final String applicationId;
    final AtomicLong linesRead = new AtomicLong();
    final AtomicLong wordsCounted = new AtomicLong();
    final AtomicLong lastActivity = new AtomicLong(System.nanoTime());
    final AtomicInteger threadDeaths = new AtomicInteger();
    final List<String> deaths = new ArrayList<>();
    final KafkaStreams streams;
    private final CrashBarrier crash;

    /** `crash`: told of each record this instance processes and of each thread that dies. */
    WordCountApp(Properties p, String input, String output, CrashBarrier crash) {
      this.applicationId = p.getProperty(StreamsConfig.APPLICATION_ID_CONFIG);
      this.crash = crash;
      StreamsBuilder builder = new StreamsBuilder();
      builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
          .peek((k, v) -> processed(linesRead))
          .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
          .filter((k, word) -> !word.isEmpty())
          .selectKey((k, word) -> word)
          .repartition()
          .peek((word, v) -> processed(wordsCounted))
          .groupByKey()
          .count(Materialized.as("counts"))
          .toStream()
          .to(output, Produced.with(Serdes.String(), Serdes.Long()));
      streams = new KafkaStreams(builder.build(), p);
      streams.setUncaughtExceptionHandler(e -> {
        threadDeaths.incrementAndGet();
        synchronized (deaths) {
          deaths.add(e.getClass().getName() + ": " + e.getMessage());
        }
        Driver.emit(new Driver.Json().put("type", "thread-died").put("app", applicationId).put("error", String.valueOf(e)));
        this.crash.died();
        return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
      });
      streams.setStateListener((now, before) ->
          Driver.emit(new Driver.Json().put("type", "state").put("app", applicationId).put("state", now.name())));
    }

    private void processed(AtomicLong counter) {
      counter.incrementAndGet();
      lastActivity.set(System.nanoTime());
      crash.processed(this);
    }

    long processed() {
      return linesRead.get() + wordsCounted.get();
    }

    boolean died() {
      return threadDeaths.get() > 0;
    }

    boolean failed() {
      KafkaStreams.State state = streams.state();
      return state == KafkaStreams.State.ERROR || state == KafkaStreams.State.NOT_RUNNING || state == KafkaStreams.State.PENDING_ERROR;
    }

    /** Closes cleanly, which commits what was processed (at_least_once) or the open transaction (EOS). */
    Driver.Json close(String finalState) {
      boolean closed = streams.close(Duration.ofSeconds(60));
      List<String> deathList;
      synchronized (deaths) {
        deathList = new ArrayList<>(deaths);
      }
      return new Driver.Json().put("app", applicationId).put("lines", linesRead.get()).put("words", wordsCounted.get())
          .put("threadDeaths", threadDeaths.get()).put("deaths", deathList).put("state", finalState).put("closed", closed);
    }
  }

  /** A word-count app's settings; the test's options on top of Driver's connection settings. */
  static Properties appProperties(Driver.Args args, String applicationId, String stateDir, String protocol, String guarantee) {
    Properties p = Driver.common(args);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    // The string, not StreamsConfig.GROUP_PROTOCOL_CONFIG: the driver builds against 3.9 too.
    p.put("group.protocol", protocol);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.optional("commit-interval-ms", "200"));
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args.optional("threads", "1"));
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG), "100");
    return p;
  }

  static void wordcount(Driver.Args args) throws Exception {
    long minLines = args.intValue("min-lines", 0);
    long minWords = args.intValue("min-words", 0);
    long quietMs = args.intValue("quiet-ms", 5000);
    long timeoutMs = args.intValue("timeout-ms", 120_000);
    Properties p = appProperties(args, args.required("application-id"), args.required("state-dir"),
        args.optional("protocol", "streams"), args.optional("guarantee", "at_least_once"));
    WordCountApp app = new WordCountApp(p, args.required("input"), args.required("output"), CrashBarrier.NEVER);
    long start = System.nanoTime();
    app.streams.start();
    boolean timedOut = false;
    while (!app.failed()) {
      long now = System.nanoTime();
      if (app.linesRead.get() >= minLines && app.wordsCounted.get() >= minWords
          && app.streams.state() == KafkaStreams.State.RUNNING
          && TimeUnit.NANOSECONDS.toMillis(now - app.lastActivity.get()) >= quietMs) break;
      if (TimeUnit.NANOSECONDS.toMillis(now - start) >= timeoutMs) {
        timedOut = true;
        break;
      }
      Thread.sleep(100);
    }
    Driver.emit(app.close(app.streams.state().name()).put("type", "done").put("timedOut", timedOut));
  }

  static void wordcountApps(Driver.Args args) throws Exception {
    String stateDir = args.required("state-dir");
    long timeoutMs = args.intValue("timeout-ms", 600_000);
    long sigkillAfter = args.intValue("sigkill-after", 0);
    String sessionTimeoutMs = args.optional("session-timeout-ms");
    CountDownLatch stdinClosed = new CountDownLatch(1);
    Thread reader = new Thread(() -> {
      try {
        while (System.in.read() >= 0) {
          // only its end matters
        }
      } catch (java.io.IOException e) {
        // a closed stdin ends the apps all the same
      }
      stdinClosed.countDown();
    }, "stdin-watch");
    reader.setDaemon(true);
    reader.start();

    List<WordCountApp> apps = new ArrayList<>();
    CrashBarrier crash = new CrashBarrier(sigkillAfter, apps);
    Map<String, List<String>> streamsGroupsByBootstrap = new LinkedHashMap<>();
    for (String line : Files.readAllLines(Path.of(args.required("apps-file")))) {
      if (line.isBlank()) continue;
      String[] f = line.split("\t");
      if (f.length != 6) throw new IllegalArgumentException("apps file: expected 6 fields, got: " + line);
      String applicationId = f[0], bootstrap = f[1], protocol = f[4];
      Properties p = appProperties(args, applicationId, stateDir, protocol, f[5]);
      p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      if (sessionTimeoutMs != null && protocol.equals("classic")) {
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), sessionTimeoutMs);
      }
      if (sessionTimeoutMs != null && protocol.equals("streams")) {
        streamsGroupsByBootstrap.computeIfAbsent(bootstrap, b -> new ArrayList<>()).add(applicationId);
      }
      apps.add(new WordCountApp(p, f[2], f[3], crash));
    }
    for (var entry : streamsGroupsByBootstrap.entrySet()) setStreamsSessionTimeout(args, entry.getKey(), entry.getValue(), sessionTimeoutMs);

    for (WordCountApp app : apps) app.streams.start();
    boolean timedOut = !stdinClosed.await(timeoutMs, TimeUnit.MILLISECONDS);
    // Closed together: one after another, a slow close would keep the others' members in their
    // groups, and the test waits for all of them.
    Driver.Json[] results = new Driver.Json[apps.size()];
    Thread[] closers = new Thread[apps.size()];
    for (int i = 0; i < apps.size(); i++) {
      WordCountApp app = apps.get(i);
      String finalState = app.streams.state().name();
      int slot = i;
      closers[i] = new Thread(() -> results[slot] = app.close(finalState), "close-" + app.applicationId);
      closers[i].start();
    }
    for (Thread closer : closers) closer.join();
    Driver.emit(new Driver.Json().put("type", "done").put("apps", Arrays.asList(results)).put("timedOut", timedOut));
  }

  /** Sets the groups' streams.session.timeout.ms (a group config, KIP-1071) through `bootstrap`. */
  static void setStreamsSessionTimeout(Driver.Args args, String bootstrap, List<String> groups, String ms) throws Exception {
    Properties p = Driver.common(args);
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    var op = new AlterConfigOp(new ConfigEntry("streams.session.timeout.ms", ms), AlterConfigOp.OpType.SET);
    Map<ConfigResource, java.util.Collection<AlterConfigOp>> changes = new HashMap<>();
    // Type.GROUP by its id: kafka-clients 3.9 has no such constant, and the driver builds against it.
    ConfigResource.Type groupType = ConfigResource.Type.forId((byte) 32);
    for (String group : groups) changes.put(new ConfigResource(groupType, group), List.of(op));
    try (Admin admin = Admin.create(p)) {
      admin.incrementalAlterConfigs(changes).all().get(30, TimeUnit.SECONDS);
    }
  }

  /**
   * `--sigkill-after N` of the apps of one process: each app's stream thread stops at its N-th
   * record until every app has got there (or lost its thread), then the process SIGKILLs itself.
   * Every app's instance thus dies with exactly N records processed and more to come: mid-stream,
   * however much faster some apps go than others (those directly at the broker than those
   * through a proxy). Held a few seconds at most: far within the poll interval and, for
   * exactly_once_v2, the transaction timeout (the transaction dies with the process anyway).
   */
  static final class CrashBarrier {
    static final CrashBarrier NEVER = new CrashBarrier(0, List.of());
    private final long after;
    private final List<WordCountApp> apps;
    private final AtomicBoolean fired = new AtomicBoolean();

    CrashBarrier(long after, List<WordCountApp> apps) {
      this.after = after;
      this.apps = apps;
    }

    /** Called by `app`'s stream thread after each record it processed. */
    void processed(WordCountApp app) {
      if (after <= 0 || app.processed() < after) return;
      while (true) {
        fireIfAllThere();
        try {
          Thread.sleep(10); // until the others get there, or the SIGKILL lands
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }

    /** Called after a stream thread died: an app that will never get there no longer holds the others. */
    void died() {
      if (after > 0) fireIfAllThere();
    }

    private void fireIfAllThere() {
      for (WordCountApp app : apps) if (app.processed() < after && !app.died()) return;
      if (fired.compareAndSet(false, true)) sigkill(apps);
    }
  }

  /** SIGKILLs this process, after a line with what each app has processed (input lines, words). */
  static void sigkill(List<WordCountApp> apps) {
    Driver.Json processed = new Driver.Json();
    for (WordCountApp app : apps) processed.put(app.applicationId, List.of(app.linesRead.get(), app.wordsCounted.get()));
    Driver.emit(new Driver.Json().put("type", "sigkill").put("processed", processed));
    try {
      System.out.flush();
      new ProcessBuilder("kill", "-9", String.valueOf(ProcessHandle.current().pid())).inheritIO().start().waitFor();
      Thread.sleep(60_000); // the signal arrives first
    } catch (Exception e) {
      // fall through to the error below
    }
    throw new IllegalStateException("still alive after kill -9");
  }

  static void readCounts(Driver.Args args) throws Exception {
    long timeoutMs = args.intValue("timeout-ms", 60_000);
    Properties p = Driver.common(args);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
    Map<String, Map<String, Long>> counts = new TreeMap<>();
    long records = 0;
    boolean timedOut = false;
    try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(p)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (String topic : topics(args)) {
        counts.put(topic, new TreeMap<>());
        for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) partitions.add(new TopicPartition(topic, info.partition()));
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      // read_committed: the end is the last stable offset.
      Map<TopicPartition, Long> end = new HashMap<>(consumer.endOffsets(partitions, Duration.ofSeconds(30)));
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
      while (true) {
        boolean atEnd = true;
        for (TopicPartition tp : partitions) if (consumer.position(tp, Duration.ofSeconds(30)) < end.get(tp)) atEnd = false;
        if (atEnd) break;
        if (System.nanoTime() > deadline) {
          timedOut = true;
          break;
        }
        for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
          counts.get(r.topic()).put(r.key(), r.value());
          records++;
        }
      }
    }
    Driver.Json byTopic = new Driver.Json();
    for (var topic : counts.entrySet()) {
      Driver.Json json = new Driver.Json();
      for (var e : topic.getValue().entrySet()) json.put(e.getKey(), e.getValue());
      byTopic.put(topic.getKey(), json);
    }
    Driver.emit(new Driver.Json().put("type", "counts").put("records", records).put("topics", byTopic).put("timedOut", timedOut));
  }
}
