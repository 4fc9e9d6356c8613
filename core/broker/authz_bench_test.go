package broker

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

// dataPathAuthz is a broker with only an authorizer holding 200 topic
// ACLs for alice, and a produce and a fetch request of 10 topics she
// may write and read.
func dataPathAuthz() (*Broker, *wire.Request, *wire.Request) {
	az := acl.New(acl.Config{SuperUsers: []string{"User:admin"}})
	var bs []acl.Binding
	for i := range 200 {
		name := "topic-" + strconv.Itoa(i)
		bs = append(bs, topicACLNamed(name, "alice", opWrite), topicACLNamed(name, "alice", opRead))
	}
	az.Set(bs)
	b := &Broker{authz: az}
	b.meta.Store(emptySnapshot())
	conn := &wire.ConnInfo{Principal: sdk.Principal{Type: "User", Name: "alice"}, Remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID = 12, -1
	for i := range 10 {
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "topic-" + strconv.Itoa(i*7)
		produce.Topics = append(produce.Topics, pt)
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = pt.Topic
		fetch.Topics = append(fetch.Topics, ft)
	}
	return b, &wire.Request{Key: 0, Version: 9, Body: produce, Conn: conn}, &wire.Request{Key: 1, Version: 12, Body: fetch, Conn: conn}
}

func topicACLNamed(name, user string, op acl.Operation) acl.Binding {
	return allowACL(rtTopic, kmsg.ACLResourcePatternTypeLiteral, name, user, op)
}

// TestDataPathAuthzAllocatesNothing: authorizing an allowed produce or
// fetch of 10 topics allocates nothing.
func TestDataPathAuthzAllocatesNothing(t *testing.T) {
	b, produce, fetch := dataPathAuthz()
	for _, req := range []*wire.Request{produce, fetch} {
		check := authzTable[req.Key].check
		if deny, merge := check(b, req, whoOf(req)); deny != nil || merge != nil {
			t.Fatalf("api %d refused", req.Key)
		}
		if n := testing.AllocsPerRun(100, func() { check(b, req, whoOf(req)) }); n != 0 {
			t.Errorf("api %d: %v allocations per authorization", req.Key, n)
		}
	}
}

// BenchmarkAuthorizeProduce measures the authorization of a produce
// request of 10 topics (10 decisions).
func BenchmarkAuthorizeProduce(b *testing.B) {
	br, produce, _ := dataPathAuthz()
	check := authzTable[0].check
	b.ReportAllocs()
	for range b.N {
		check(br, produce, whoOf(produce))
	}
}

// BenchmarkAuthorizeFetch: the same for a consumer fetch.
func BenchmarkAuthorizeFetch(b *testing.B) {
	br, _, fetch := dataPathAuthz()
	check := authzTable[1].check
	b.ReportAllocs()
	for range b.N {
		check(br, fetch, whoOf(fetch))
	}
}

// TestTxnChecks exercises the transaction APIs' rows directly (the
// matrix skips them until the broker serves the APIs).
func TestTxnChecks(t *testing.T) {
	az := acl.New(acl.Config{})
	b := &Broker{authz: az}
	b.meta.Store(emptySnapshot())
	conn := &wire.ConnInfo{Principal: sdk.Principal{Type: "User", Name: "alice"}}
	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	apt.Version, apt.TransactionalID = 3, "tx"
	for _, name := range []string{"a", "b"} {
		tp := kmsg.NewAddPartitionsToTxnRequestTopic()
		tp.Topic, tp.Partitions = name, []int32{0}
		apt.Topics = append(apt.Topics, tp)
	}
	aot := kmsg.NewPtrAddOffsetsToTxnRequest()
	aot.TransactionalID, aot.Group = "tx", "g"
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = "tx"
	codes := func(key int16, body kmsg.Request) []int16 {
		deny, _ := authzTable[key].check(b, &wire.Request{Key: key, Body: body, Conn: conn}, whoOf(&wire.Request{Conn: conn}))
		if deny == nil {
			return nil
		}
		return errorCodes(deny)
	}
	want := func(key int16, body kmsg.Request, w ...int16) {
		t.Helper()
		if got := codes(key, body); !slices.Equal(got, w) {
			t.Errorf("api %d: codes %v, want %v", key, got, w)
		}
	}
	want(24, apt, 0, errTxnAuthz, errTxnAuthz) // the v4+ top-level code, then each partition
	want(25, aot, errTxnAuthz)
	want(26, end, errTxnAuthz)
	az.Set([]acl.Binding{
		allowACL(rtTxnID, kmsg.ACLResourcePatternTypeLiteral, "tx", "alice", opWrite),
		topicACLNamed("a", "alice", opWrite),
	})
	want(24, apt, 0, kerr.OperationNotAttempted.Code, errTopicAuthz) // b refused, a not attempted
	want(25, aot, errGroupAuthz)
	want(26, end)
	az.Set(append(az.Bindings(), topicACLNamed("b", "alice", opWrite), allowACL(rtGroup, kmsg.ACLResourcePatternTypeLiteral, "g", "alice", opRead)))
	want(24, apt)
	want(25, aot)
	apt.Version = 4
	want(24, apt, errClusterAuthz) // batched: broker to broker
}
