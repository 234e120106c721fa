import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * The `admin` commands of the test-bed driver (Driver.java, which parses the command line and
 * prints the output): cluster, group and topic operations through the Java Admin client. Compiled
 * with Driver.java into every program of the bed (test/bed/clients/java.ts).
 */
final class DriverAdmin {
  private DriverAdmin() {}

  static void describeCluster(Driver.Args args) throws Exception {
    try (Admin admin = Admin.create(Driver.common(args))) {
      DescribeClusterResult r = admin.describeCluster();
      List<Driver.Json> nodes = new ArrayList<>();
      for (Node n : r.nodes().get(30, TimeUnit.SECONDS)) nodes.add(Driver.nodeJson(n));
      Node controller = r.controller().get(30, TimeUnit.SECONDS);
      Driver.emit(new Driver.Json().put("type", "cluster").put("clusterId", r.clusterId().get(30, TimeUnit.SECONDS)).put("controller", controller == null ? null : Driver.nodeJson(controller)).put("nodes", nodes));
    }
  }

  static void groupOffsets(Driver.Args args) throws Exception {
    String group = args.required("group");
    try (Admin admin = Admin.create(Driver.common(args))) {
      Driver.emitCommitted(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS));
    }
  }

  static void createTopic(Driver.Args args) throws Exception {
    String topic = args.required("topic");
    int partitions = args.intValue("partitions", 1);
    short rf = (short) args.intValue("replication-factor", 1);
    boolean created = true;
    try (Admin admin = Admin.create(Driver.common(args))) {
      admin.createTopics(List.of(new NewTopic(topic, partitions, rf))).all().get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      if (!(e.getCause() instanceof TopicExistsException)) throw e;
      created = false;
    }
    Driver.emit(new Driver.Json().put("type", "topic").put("topic", topic).put("created", created));
  }

  static void deleteGroup(Driver.Args args) throws Exception {
    String group = args.required("group");
    try (Admin admin = Admin.create(Driver.common(args))) {
      admin.deleteConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
    }
    Driver.emit(new Driver.Json().put("type", "group-deleted").put("group", group));
  }

  /** Admin.listConsumerGroups: one line per group, with its state as the client reports it. */
  static void listGroups(Driver.Args args) throws Exception {
    try (Admin admin = Admin.create(Driver.common(args))) {
      for (Object listing : admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS)) {
        Driver.emit(new Driver.Json().put("type", "group").put("group", (String) call(listing, "groupId")).put("state", stateName(call(listing, "groupState", "state"))));
      }
    }
    Driver.emit(new Driver.Json().put("type", "listed"));
  }

  /** Admin.describeConsumerGroups of one group: state, members and partition assignor. */
  static void describeGroup(Driver.Args args) throws Exception {
    String group = args.required("group");
    try (Admin admin = Admin.create(Driver.common(args))) {
      Object d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS);
      Collection<?> members = (Collection<?>) call(d, "members");
      Driver.emit(new Driver.Json().put("type", "described").put("group", group).put("state", stateName(call(d, "groupState", "state"))).put("members", members.size()).put("simple", call(d, "isSimpleConsumerGroup")));
    }
  }

  /**
   * The first of these no-argument methods that exists: 4.x renamed `state()` to `groupState()`,
   * and the driver compiles against 3.9 and 4.x alike.
   */
  static Object call(Object target, String... names) throws Exception {
    for (String name : names) {
      try {
        return target.getClass().getMethod(name).invoke(target);
      } catch (NoSuchMethodException e) {
        // try the next name
      }
    }
    throw new NoSuchMethodException(target.getClass().getName() + "." + String.join("/", names));
  }

  /** An Optional<state> or a state, as its name ("Empty", "Stable", ...). */
  static String stateName(Object state) {
    if (state instanceof java.util.Optional<?> o) return o.map(String::valueOf).orElse("");
    return String.valueOf(state);
  }
}
