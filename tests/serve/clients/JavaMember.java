// JavaMember is one member of a consumer group (Apache Kafka's Java KafkaConsumer, the classic
// group protocol), driven line by line over stdin so that a test can interleave it with other
// members and with appends, as it drives the Python clients' consumers:
//
//	java -cp kafka-clients.jar:... JavaMember -broker 127.0.0.1:9092 -group g -topics a,b [-X k=v]
//
//	poll N      at most N records, a JSON line each (JavaConsume's format): those a poll
//	            (200 ms at most) left over, else a new poll's
//	assignment  the partitions the group gave it: one JSON line [["topic", partition], ...]
//	commit      commitSync() of the offsets after the records it handed out
//	close       close(): it leaves the group; the process ends
//
// Every answer ends with a line holding a single dot. The consumer starts from the committed
// offsets (the earliest without) and never commits by itself.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class JavaMember {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("group.protocol", "classic");
        List<String> topics = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "-broker" -> props.put("bootstrap.servers", args[++i]);
                case "-group" -> props.put("group.id", args[++i]);
                case "-topics" -> topics.addAll(Arrays.asList(args[++i].split(",")));
                case "-X" -> {
                    String[] setting = args[++i].split("=", 2);
                    props.put(setting[0], setting[1]);
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ArrayDeque<ConsumerRecord<byte[], byte[]>> pending = new ArrayDeque<>();
        Map<TopicPartition, OffsetAndMetadata> handed = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(topics, new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                    pending.removeIf(r -> revoked.contains(new TopicPartition(r.topic(), r.partition())));
                    revoked.forEach(handed::remove);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> assigned) {}
            });
            String command;
            while ((command = in.readLine()) != null && !command.equals("close")) {
                String[] words = command.split(" ");
                switch (words[0]) {
                    case "poll" -> {
                        if (pending.isEmpty()) {
                            consumer.poll(Duration.ofMillis(200)).forEach(pending::add);
                        }
                        StringBuilder out = new StringBuilder();
                        for (int n = Integer.parseInt(words[1]); n > 0 && !pending.isEmpty(); n--) {
                            ConsumerRecord<byte[], byte[]> record = pending.poll();
                            handed.put(new TopicPartition(record.topic(), record.partition()),
                                    new OffsetAndMetadata(record.offset() + 1));
                            out.setLength(0);
                            System.out.println(JavaConsume.json(record, out));
                        }
                    }
                    case "assignment" -> {
                        List<String> held = new ArrayList<>();
                        for (TopicPartition tp : consumer.assignment()) {
                            held.add("[" + JavaConsume.quote(tp.topic()) + "," + tp.partition() + "]");
                        }
                        System.out.println("[" + String.join(",", held) + "]");
                    }
                    case "commit" -> consumer.commitSync(handed);
                    default -> throw new IllegalArgumentException("unknown command " + command);
                }
                System.out.println(".");
                System.out.flush();
            }
        }
        System.out.println(".");
        System.out.flush();
    }
}
