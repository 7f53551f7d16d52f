// Command sarama_consume reads whole partitions from one Kafka broker with Shopify's sarama
// 1.22 (a Go implementation of the Kafka protocol, sharing nothing with the Python and C
// clients; as Debian packages it, it speaks Fetch v4, ListOffsets v1 and Metadata v5) and prints
// one JSON line a record: topic, partition, offset, key, value (base64, null for a null), the
// timestamp in milliseconds and the headers. sarama does not say whether a timestamp is the
// producer's or the broker's.
//
//	sarama_consume -broker 127.0.0.1:9092 -topics events:3,other:1 [-committed]
//
// Each partition is read from its earliest offset up to the high watermark ListOffsets gives.
// Where no record reaches it (a transaction marker holds the last offset; read_committed stops
// at the last stable offset or skips aborted records at the end), a partition ends after -idle
// without a record (sarama waits 250 ms for an empty fetch).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	flag.Parse()
	config := sarama.NewConfig()
	config.Version = sarama.V2_1_0_0
	config.Consumer.Return.Errors = true
	if *committed {
		config.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	client, err := sarama.NewClient([]string{*broker}, config)
	check(err)
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	check(err)
	defer consumer.Close()
	out := json.NewEncoder(os.Stdout)
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

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "sarama_consume:", err)
		os.Exit(1)
	}
}
