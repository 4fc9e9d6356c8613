package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecode: a stored value never panics the decoder, and whatever
// decodes is a valid binding that encodes back to itself under its key.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(bind(topic, prefix, "a", "User:alice", "*", kmsg.ACLOperationRead, allow)))
	f.Add(Encode(bind(cluster, literal, ClusterName, "User:b", "10.0.0.1", kmsg.ACLOperationAll, deny)))
	f.Add([]byte(`{"resourceType":2}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, v []byte) {
		b, err := Decode(v)
		if err != nil {
			return
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid binding: %v", err)
		}
		again, err := Decode(Encode(b))
		if err != nil || again != b || again.Key() != b.Key() {
			t.Fatalf("round trip: %+v -> %+v (%v)", b, again, err)
		}
		a := New(Config{})
		a.Set([]Binding{b})
		a.Authorize(alice, local, b.ResourceType, b.ResourceName, b.Operation)
	})
}
