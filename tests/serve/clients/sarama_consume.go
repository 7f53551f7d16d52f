// Command sarama_consume reads whole partitions from one Kafka broker with Shopify's sarama
// 1.22 (a Go implementation of the Kafka protocol, sharing nothing with the Python and C
// clients; as Debian packages it, it speaks Fetch v4, ListOffsets v1 and Metadata v5) and prints
// one JSON line a record: topic, partition, offset, key, value (base64, null for a null), the
// timestamp in milliseconds and the headers. sarama does not say whether a timestamp is the
// producer's or the broker's.
//
//	sarama_consume -broker 127.0.0.1:9092 -topics events:3,other:1 [-committed]
//	sarama_consume -broker 127.0.0.1:9092 -topics events:3 -group g
//
// With -group, one member of group g (sarama's ConsumerGroup: JoinGroup v1, SyncGroup v0,
// Heartbeat v0, OffsetFetch v1, OffsetCommit v2) reads from the committed
// offsets (the earliest without), marks every record, and leaves once each partition reached
// its high watermark: closing the group commits what was marked.
//
// Each partition is read from its earliest offset up to the high watermark ListOffsets gives.
// Where no record reaches it (a transaction marker holds the last offset; read_committed stops
// at the last stable offset or skips aborted records at the end), a partition ends after -idle
// without a record (sarama waits 250 ms for an empty fetch).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

type header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type row struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Timestamp int64    `json:"timestamp"`
	Headers   []header `json:"headers"`
}

func main() {
	broker := flag.String("broker", "127.0.0.1:9092", "bootstrap broker")
	topics := flag.String("topics", "", "topic:partitions,...")
	committed := flag.Bool("committed", false, "read_committed")
	idle := flag.Duration("idle", time.Second, "end a partition after this long without a record")
	group := flag.String("group", "", "read as a member of this consumer group")
	flag.Parse()
	if os.Getenv("SARAMA_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Ltime)
	}
	config := sarama.NewConfig()
	config.Version = sarama.V2_1_0_0
	config.Consumer.Return.Errors = true
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	// A retention makes sarama commit with OffsetCommit v2: Kafka 4 (and serve, as it) no
	// longer answers v0-1, which sarama 1.22 sends otherwise.
	config.Consumer.Offsets.Retention = 24 * time.Hour
	if *committed {
		config.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	client, err := sarama.NewClient([]string{*broker}, config)
	check(err)
	defer client.Close()
	out := json.NewEncoder(os.Stdout)
	if *group != "" {
		readGroup(client, *group, *topics, out)
		return
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	check(err)
	defer consumer.Close()
	for _, spec := range strings.Split(*topics, ",") {
		parts := strings.SplitN(spec, ":", 2)
		count, err := strconv.Atoi(parts[1])
		check(err)
		for p := int32(0); p < int32(count); p++ {
			readPartition(client, consumer, parts[0], p, *idle, out)
		}
	}
}

func readPartition(client sarama.Client, consumer sarama.Consumer, topic string, p int32,
	idle time.Duration, out *json.Encoder) {
	end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
	check(err)
	start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
	check(err)
	if start >= end {
		return
	}
	pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
	check(err)
	defer pc.Close()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-pc.Messages():
			r := row{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key,
				Value: m.Value, Timestamp: m.Timestamp.UnixNano() / int64(time.Millisecond)}
			for _, h := range m.Headers {
				r.Headers = append(r.Headers, header{string(h.Key), h.Value})
			}
			check(out.Encode(r))
			if m.Offset+1 >= end {
				return
			}
		case e := <-pc.Errors():
			check(e)
		case <-time.After(idle):
			return
		case <-deadline:
			check(fmt.Errorf("%s-%d: no end after 30 s", topic, p))
		}
	}
}

// member reads its claims up to the high watermarks ListOffsets gives when they start (sarama
// 1.22 learns a high watermark only from a fetch that returns records), then ends the session.
type member struct {
	client  sarama.Client
	out     *json.Encoder
	mu      sync.Mutex
	left    int
	session context.CancelFunc
}

func (m *member) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	next := c.InitialOffset()
	if next < 0 { // no committed offset: the earliest
		var err error
		next, err = m.client.GetOffset(c.Topic(), c.Partition(), sarama.OffsetOldest)
		check(err)
	}
	end, err := m.client.GetOffset(c.Topic(), c.Partition(), sarama.OffsetNewest)
	check(err)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if next >= end {
			m.finished()
			// Stay until the session ends: sarama ends a session for every claim as soon as one
			// ConsumeClaim returns, which would stop partitions still being read.
			<-s.Context().Done()
			return nil
		}
		select {
		case msg, ok := <-c.Messages():
			if !ok {
				return nil
			}
			m.print(msg)
			s.MarkMessage(msg, "")
			next = msg.Offset + 1
		case <-tick.C:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (m *member) print(msg *sarama.ConsumerMessage) {
	r := row{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset, Key: msg.Key,
		Value: msg.Value, Timestamp: msg.Timestamp.UnixNano() / int64(time.Millisecond)}
	for _, h := range msg.Headers {
		r.Headers = append(r.Headers, header{string(h.Key), h.Value})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	check(m.out.Encode(r))
}

func (m *member) finished() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.left--
	if m.left == 0 {
		m.session()
	}
}

func readGroup(client sarama.Client, group string, topics string, out *json.Encoder) {
	var names []string
	total := 0
	for _, spec := range strings.Split(topics, ",") {
		parts := strings.SplitN(spec, ":", 2)
		count, err := strconv.Atoi(parts[1])
		check(err)
		names = append(names, parts[0])
		total += count
	}
	g, err := sarama.NewConsumerGroupFromClient(group, client)
	check(err)
	go func() {
		for e := range g.Errors() {
			check(e)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := &member{client: client, out: out, left: total, session: cancel}
	check(g.Consume(ctx, names, m))
	check(g.Close())
	if m.left > 0 {
		check(fmt.Errorf("group %s: %d partitions did not reach their end in 30 s", group, m.left))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "sarama_consume:", err)
		os.Exit(1)
	}
}
