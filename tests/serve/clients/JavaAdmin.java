// JavaAdmin asks one Kafka broker what Apache Kafka's own tools ask (kafka-topics.sh,
// kafka-configs.sh, kafka-consumer-groups.sh and the web UIs are built on this Admin client),
// with the Java client on the class path, and prints the answers as one JSON object:
//
//	java -cp kafka-clients.jar:... JavaAdmin -broker 127.0.0.1:9092 -topic events -group g
//
// cluster: the cluster id and broker ids; topics: every topic name; partitions: the described
// topic's partition count, and its id; configs: its cleanup.policy and segment.bytes;
// earliest / latest / maxTimestamp: offsets per partition (ListOffsets); groups: the group
// ids listed; group: the described group's state and member count; committed: its committed
// offset per partition of the topic.
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public final class JavaAdmin {
    public static void main(String[] args) throws Exception {
        String broker = "127.0.0.1:9092";
        String topic = "";
        String group = "";
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "-broker" -> broker = args[++i];
                case "-topic" -> topic = args[++i];
                case "-group" -> group = args[++i];
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", broker);
        props.put("request.timeout.ms", "15000");
        props.put("default.api.timeout.ms", "20000");
        Map<String, Object> out = new TreeMap<>();
        try (Admin admin = Admin.create(props)) {
            var cluster = admin.describeCluster();
            out.put("cluster", List.of(cluster.clusterId().get(), cluster.nodes().get().stream().map(n -> n.id()).toList()));
            out.put("topics", new ArrayList<>(new java.util.TreeSet<>(admin.listTopics().names().get())));
            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            out.put("partitions", described.partitions().size());
            out.put("topicId", described.topicId().toString());
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            out.put("configs", List.of(config.get("cleanup.policy").value(), config.get("segment.bytes").value()));
            List<TopicPartition> tps = new ArrayList<>();
            String name = topic;
            described.partitions().forEach(p -> tps.add(new TopicPartition(name, p.partition())));
            out.put("earliest", offsets(admin, tps, OffsetSpec.earliest()));
            out.put("latest", offsets(admin, tps, OffsetSpec.latest()));
            out.put("maxTimestamp", offsets(admin, tps, OffsetSpec.maxTimestamp()));
            Collection<GroupListing> groups = admin.listGroups().all().get();
            out.put("groups", groups.stream().map(GroupListing::groupId).sorted().toList());
            ConsumerGroupDescription description =
                    admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            out.put("group", List.of(description.groupState().toString(), description.members().size()));
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<String, Long> byPartition = new TreeMap<>();
            committed.forEach((tp, o) -> byPartition.put(String.valueOf(tp.partition()), o.offset()));
            out.put("committed", byPartition);
        }
        System.out.println(json(out));
    }

    private static Map<String, Long> offsets(Admin admin, List<TopicPartition> tps, OffsetSpec spec)
            throws Exception {
        Map<TopicPartition, OffsetSpec> asked = new HashMap<>();
        tps.forEach(tp -> asked.put(tp, spec));
        Map<String, Long> found = new TreeMap<>();
        admin.listOffsets(asked).all().get().forEach((tp, info) -> found.put(String.valueOf(tp.partition()), info.offset()));
        return found;
    }

    private static String json(Object value) {
        if (value instanceof Map<?, ?> map) {
            List<String> parts = new ArrayList<>();
            map.forEach((k, v) -> parts.add(json(String.valueOf(k)) + ":" + json(v)));
            return "{" + String.join(",", parts) + "}";
        }
        if (value instanceof Collection<?> list) {
            return "[" + String.join(",", list.stream().map(JavaAdmin::json).toList()) + "]";
        }
        if (value instanceof String text) {
            return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        }
        return String.valueOf(value);
    }
}
