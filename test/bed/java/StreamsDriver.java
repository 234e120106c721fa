import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
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
 *   produce-lines --bootstrap B --topic T --file F
 *     Produces each line of F as one record (key: its line number, so the lines spread over the
 *     topic's partitions), idempotently, and waits until all are acknowledged.
 *   wordcount --bootstrap B --application-id A --input T --output O --state-dir D
 *             [--protocol classic|streams] [--guarantee at_least_once|exactly_once_v2]
 *             [--commit-interval-ms C] [--min-lines L] [--min-words W] [--quiet-ms Q] [--timeout-ms MS]
 *             [--until-stdin-closed] [--sigkill-after N] [--session-timeout-ms S]
 *     Counts the words of T (lower case, split on non-word characters) into O (word -> count, a
 *     long). Stops once it has read at least L input lines and W words back from its repartition
 *     topic and then nothing new arrived for Q ms (or at the timeout), closes cleanly (which
 *     commits), and prints a `done` line. A stream thread that dies is counted (`threadDeaths`)
 *     and ends the app: the test must see it, not a restarted thread that hides it.
 *     --until-stdin-closed: stops when its stdin closes instead (one of several instances of an
 *     app, whose test decides when the group is done), or at the timeout.
 *     --sigkill-after N: once this instance has processed N records (input lines plus words),
 *     the process SIGKILLs itself mid-stream: no commit, no leave, no close, as a crash.
 *     --session-timeout-ms S: first sets the group's streams.session.timeout.ms (a group config,
 *     KIP-1071), so a crashed instance's tasks move on sooner than after the broker's 45 s default.
 *   read-counts --bootstrap B --topic O [--timeout-ms MS]
 *     Reads O from the start to its end (read_committed, no group) and prints the last count of
 *     each word.
 *   warmup
 */
public final class StreamsDriver {
  private StreamsDriver() {}

  public static void main(String[] argv) {
    Driver.runCommand(() -> {
      if (argv.length == 0) throw new IllegalArgumentException("missing command");
      Driver.Args args = Driver.Args.parse(argv, 1);
      switch (argv[0]) {
        case "produce-lines" -> produceLines(args);
        case "wordcount" -> wordcount(args);
        case "read-counts" -> readCounts(args);
        case "warmup" -> Driver.emit(new Driver.Json().put("type", "warmup").put("ok", true));
        default -> throw new IllegalArgumentException("unknown command: " + argv[0]);
      }
    });
  }

  static void produceLines(Driver.Args args) throws Exception {
    String topic = args.required("topic");
    List<String> lines = Files.readAllLines(Path.of(args.required("file")));
    Properties p = Driver.common(args);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
      for (int i = 0; i < lines.size(); i++) sent.add(producer.send(new ProducerRecord<>(topic, String.valueOf(i), lines.get(i))));
      for (var f : sent) f.get(60, TimeUnit.SECONDS);
    }
    Driver.emit(new Driver.Json().put("type", "produced").put("count", lines.size()));
  }

  static void wordcount(Driver.Args args) throws Exception {
    String input = args.required("input");
    String output = args.required("output");
    long minLines = args.intValue("min-lines", 0);
    long minWords = args.intValue("min-words", 0);
    long quietMs = args.intValue("quiet-ms", 5000);
    long timeoutMs = args.intValue("timeout-ms", 120_000);
    boolean untilStdinClosed = args.flag("until-stdin-closed");
    long sigkillAfter = args.intValue("sigkill-after", 0);
    AtomicLong processed = new AtomicLong();
    java.util.concurrent.CountDownLatch stdinClosed = new java.util.concurrent.CountDownLatch(1);
    if (untilStdinClosed) {
      Thread reader = new Thread(() -> {
        try {
          while (System.in.read() >= 0) {
            // only its end matters
          }
        } catch (java.io.IOException e) {
          // a closed stdin ends the app all the same
        }
        stdinClosed.countDown();
      }, "stdin-watch");
      reader.setDaemon(true);
      reader.start();
    }

    String sessionTimeoutMs = args.optional("session-timeout-ms");
    if (sessionTimeoutMs != null) {
      var op = new AlterConfigOp(new ConfigEntry("streams.session.timeout.ms", sessionTimeoutMs), AlterConfigOp.OpType.SET);
      var group = new ConfigResource(ConfigResource.Type.GROUP, args.required("application-id"));
      try (Admin admin = Admin.create(Driver.common(args))) {
        admin.incrementalAlterConfigs(Map.of(group, List.of(op))).all().get(30, TimeUnit.SECONDS);
      }
    }

    Properties p = Driver.common(args);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args.required("application-id"));
    p.put(StreamsConfig.STATE_DIR_CONFIG, args.required("state-dir"));
    // The string, not StreamsConfig.GROUP_PROTOCOL_CONFIG: the driver builds against 3.9 too.
    p.put("group.protocol", args.optional("protocol", "streams"));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.optional("guarantee", "at_least_once"));
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.optional("commit-interval-ms", "200"));
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args.optional("threads", "1"));
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG), "100");

    AtomicLong linesRead = new AtomicLong();
    AtomicLong wordsCounted = new AtomicLong();
    AtomicLong lastActivity = new AtomicLong(System.nanoTime());
    AtomicInteger threadDeaths = new AtomicInteger();
    List<String> deaths = new ArrayList<>();

    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .peek((k, v) -> {
          linesRead.incrementAndGet();
          lastActivity.set(System.nanoTime());
          crashAt(processed.incrementAndGet(), sigkillAfter);
        })
        .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
        .filter((k, word) -> !word.isEmpty())
        .selectKey((k, word) -> word)
        .repartition()
        .peek((word, v) -> {
          wordsCounted.incrementAndGet();
          lastActivity.set(System.nanoTime());
          crashAt(processed.incrementAndGet(), sigkillAfter);
        })
        .groupByKey()
        .count(Materialized.as("counts"))
        .toStream()
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));

    KafkaStreams streams = new KafkaStreams(builder.build(), p);
    streams.setUncaughtExceptionHandler(e -> {
      threadDeaths.incrementAndGet();
      synchronized (deaths) {
        deaths.add(e.getClass().getName() + ": " + e.getMessage());
      }
      Driver.emit(new Driver.Json().put("type", "thread-died").put("error", String.valueOf(e)));
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    streams.setStateListener((now, before) -> Driver.emit(new Driver.Json().put("type", "state").put("state", now.name())));
    long start = System.nanoTime();
    streams.start();
    boolean timedOut = false;
    while (true) {
      KafkaStreams.State state = streams.state();
      if (state == KafkaStreams.State.ERROR || state == KafkaStreams.State.NOT_RUNNING || state == KafkaStreams.State.PENDING_ERROR) break;
      long now = System.nanoTime();
      boolean done = untilStdinClosed
          ? stdinClosed.getCount() == 0
          : linesRead.get() >= minLines && wordsCounted.get() >= minWords
              && state == KafkaStreams.State.RUNNING
              && TimeUnit.NANOSECONDS.toMillis(now - lastActivity.get()) >= quietMs;
      if (done) break;
      if (TimeUnit.NANOSECONDS.toMillis(now - start) >= timeoutMs) {
        timedOut = true;
        break;
      }
      Thread.sleep(100);
    }
    String finalState = streams.state().name();
    // A clean close commits what was processed (at_least_once) or the open transaction (EOS).
    boolean closed = streams.close(Duration.ofSeconds(60));
    List<String> deathList;
    synchronized (deaths) {
      deathList = new ArrayList<>(deaths);
    }
    Driver.emit(new Driver.Json().put("type", "done").put("lines", linesRead.get()).put("words", wordsCounted.get())
        .put("threadDeaths", threadDeaths.get()).put("deaths", deathList).put("state", finalState)
        .put("closed", closed).put("timedOut", timedOut));
  }

  /** SIGKILLs this process when the instance's `processed`-th record is the `after`-th (0: never). */
  static void crashAt(long processed, long after) {
    if (after <= 0 || processed != after) return;
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
    String topic = args.required("topic");
    long timeoutMs = args.intValue("timeout-ms", 60_000);
    Properties p = Driver.common(args);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
    Map<String, Long> counts = new TreeMap<>();
    long records = 0;
    boolean timedOut = false;
    try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(p)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) partitions.add(new TopicPartition(topic, info.partition()));
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
          counts.put(r.key(), r.value());
          records++;
        }
      }
    }
    Driver.Json json = new Driver.Json();
    for (var e : counts.entrySet()) json.put(e.getKey(), e.getValue());
    Driver.emit(new Driver.Json().put("type", "counts").put("records", records).put("counts", json).put("timedOut", timedOut));
  }
}
