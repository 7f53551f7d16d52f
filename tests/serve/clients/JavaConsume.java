// JavaConsume reads whole partitions from one Kafka broker with Apache Kafka's own Java client
// (kafka-clients, KafkaConsumer; the version on the class path) and prints one JSON line a
// record: topic, partition, offset, key, value (base64, null for a null), the timestamp in
// milliseconds, its type (0 create time, 1 log append time) and the headers.
//
//	java -cp kafka-clients.jar:... JavaConsume -broker 127.0.0.1:9092 -topics events:3,other:1 [-committed]
//	java -cp ... JavaConsume -broker 127.0.0.1:9092 -topics events:3 -group g
//	java -cp ... JavaConsume -broker 127.0.0.1:9092 -topics tail:1 -count 3
//	java -cp ... JavaConsume -broker 127.0.0.1:9092 -topics bench:4 -count 262144 -quiet
//	java -cp ... JavaConsume ... -X security.protocol=SSL -X ssl.truststore.type=PEM ...
//
// -X sets any consumer property (repeatable): security (TLS, SASL) is configured as for a broker.
// Without -group the partitions are assigned and read from the beginning; with -group the
// consumer subscribes as a member of group g (the classic protocol), starts from the committed
// offsets (the earliest without), and commits what it read before it leaves. Either way each
// partition it holds is read until the consumer's position reaches the end offset the client
// asks for at the start (the high watermark, or the last stable offset for read_committed):
// the Java consumer moves its position past transaction markers and aborted batches itself. A
// group member stops once the partitions the group gave it are read, its share. With -count
// it reads until that many records came instead, however long they take to be appended (a
// consumer tailing a topic; each poll waits up to fetch.max.wait.ms for records to land).
// -quiet prints no record, only {"records": n, "seconds": s} at the end: the seconds from the
// first poll to the last record (bench/serve.py's throughput of a consumer that is not Python).
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class JavaConsume {
    private static final long DEADLINE_MS = 60_000;

    public static void main(String[] args) {
        String broker = "127.0.0.1:9092";
        String topics = "";
        String group = "";
        boolean committed = false;
        long count = -1;
        boolean quiet = false;
        Properties extra = new Properties();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "-broker" -> broker = args[++i];
                case "-topics" -> topics = args[++i];
                case "-group" -> group = args[++i];
                case "-committed" -> committed = true;
                case "-count" -> count = Long.parseLong(args[++i]);
                case "-quiet" -> quiet = true;
                case "-X" -> {
                    String[] setting = args[++i].split("=", 2);
                    extra.put(setting[0], setting[1]);
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", broker);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("isolation.level", committed ? "read_committed" : "read_uncommitted");
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.putAll(extra);
        if (!group.isEmpty()) {
            props.put("group.id", group);
            props.put("group.protocol", "classic");
        }
        List<TopicPartition> partitions = new ArrayList<>();
        for (String spec : topics.split(",")) {
            String[] parts = spec.split(":");
            for (int p = 0; p < Integer.parseInt(parts[1]); p++) {
                partitions.add(new TopicPartition(parts[0], p));
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            if (group.isEmpty()) {
                consumer.assign(partitions);
                consumer.seekToBeginning(partitions);
            } else {
                List<String> names = new ArrayList<>();
                partitions.forEach(tp -> { if (!names.contains(tp.topic())) names.add(tp.topic()); });
                consumer.subscribe(names);
            }
            if (count >= 0) {
                readCount(consumer, count, quiet);
            } else {
                readToEnd(consumer, partitions);
            }
            if (!group.isEmpty()) {
                consumer.commitSync();
            }
        }
    }

    private static void readToEnd(
            KafkaConsumer<byte[], byte[]> consumer, Collection<TopicPartition> partitions) {
        Map<TopicPartition, Long> ends = new HashMap<>(consumer.endOffsets(partitions));
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        StringBuilder out = new StringBuilder();
        while (true) {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                out.setLength(0);
                System.out.println(json(record, out));
            }
            Set<TopicPartition> mine = consumer.assignment();
            if (!mine.isEmpty() && reached(consumer, mine, ends)) {
                return;  // in a group: this member's share (all of it, alone)
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("did not reach the end offsets " + ends);
            }
        }
    }

    private static void readCount(KafkaConsumer<byte[], byte[]> consumer, long count, boolean quiet) {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        long start = System.nanoTime();
        long last = start;
        StringBuilder out = new StringBuilder();
        long seen = 0;
        while (seen < count) {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                if (!quiet) {
                    out.setLength(0);
                    System.out.println(json(record, out));
                }
                seen++;
                last = System.nanoTime();
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("saw " + seen + " of " + count + " records");
            }
        }
        if (quiet) {
            System.out.println("{\"records\":" + seen + ",\"seconds\":" + (last - start) / 1e9 + "}");
        }
    }

    private static boolean reached(
            KafkaConsumer<byte[], byte[]> consumer, Set<TopicPartition> mine, Map<TopicPartition, Long> ends) {
        for (TopicPartition tp : mine) {
            if (consumer.position(tp) < ends.get(tp)) {
                return false;
            }
        }
        return true;
    }

    static String json(ConsumerRecord<byte[], byte[]> r, StringBuilder out) {
        out.append("{\"topic\":").append(quote(r.topic()))
                .append(",\"partition\":").append(r.partition())
                .append(",\"offset\":").append(r.offset())
                .append(",\"key\":").append(base64(r.key()))
                .append(",\"value\":").append(base64(r.value()))
                .append(",\"timestamp\":").append(r.timestamp())
                .append(",\"timestampType\":").append(r.timestampType().id)
                .append(",\"headers\":[");
        String sep = "";
        for (Header h : r.headers()) {
            out.append(sep).append("{\"key\":").append(quote(h.key()))
                    .append(",\"value\":").append(base64(h.value())).append('}');
            sep = ",";
        }
        return out.append("]}").toString();
    }

    private static String base64(byte[] bytes) {
        return bytes == null ? "null" : "\"" + Base64.getEncoder().encodeToString(bytes) + "\"";
    }

    static String quote(String text) {
        StringBuilder q = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                q.append('\\').append(c);
            } else if (c < 0x20) {
                q.append(String.format("\\u%04x", (int) c));
            } else {
                q.append(c);
            }
        }
        return q.append('"').toString();
    }
}
