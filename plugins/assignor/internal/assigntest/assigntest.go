// Package assigntest is shorthand for the built-in assignors' table tests:
// groups and plans written as strings like "t0p1".
package assigntest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vltava/vltava/plugins/sdk"
)

// TP parses "t0p2" as partition 2 of topic "t0" (the topic is everything
// before the last "p").
func TP(s string) sdk.TopicPartition {
	i := strings.LastIndexByte(s, 'p')
	n, err := strconv.Atoi(s[i+1:])
	if i <= 0 || err != nil {
		panic(fmt.Sprintf("assigntest: bad partition %q", s))
	}
	return sdk.TopicPartition{Topic: s[:i], Partition: int32(n)}
}

// Plan normalizes p to member → sorted "tNpM" strings, keeping members
// that got nothing (as empty lists), for comparing with a table.
func Plan(p *sdk.Plan) map[string][]string {
	out := make(map[string][]string, len(p.Assignments))
	for id, tps := range p.Assignments {
		s := slices.Clone(tps)
		slices.SortFunc(s, sdk.TopicPartition.Compare)
		out[id] = []string{}
		for _, tp := range s {
			out[id] = append(out[id], fmt.Sprintf("%sp%d", tp.Topic, tp.Partition))
		}
	}
	return out
}

// Member is a dynamic member subscribed to topics.
func Member(id string, topics ...string) sdk.Member {
	return sdk.Member{ID: id, Topics: topics}
}

// Topics builds topics from name, partition-count pairs: Topics("t0", 3, "t1", 2).
func Topics(pairs ...any) []sdk.Topic {
	var ts []sdk.Topic
	for i := 0; i+1 < len(pairs); i += 2 {
		ts = append(ts, sdk.Topic{Name: pairs[i].(string), Partitions: int32(pairs[i+1].(int))})
	}
	return ts
}
