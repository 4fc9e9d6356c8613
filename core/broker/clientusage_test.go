package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestClientUsageRecorded(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b, kgo.ClientID("usage-app"), kgo.SoftwareNameAndVersion("usage-lib", "2.5.1"),
		kgo.DefaultProduceTopic("usage"), kgo.AllowAutoTopicCreation())
	ctx := ctxT(t)
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, u := range b.Clients() {
		if u.Name != "usage-lib" || u.Version != "2.5.1" {
			continue
		}
		found = true
		if len(u.APIs[0]) == 0 || len(u.APIs[18]) == 0 || len(u.APIs[3]) == 0 {
			t.Errorf("usage-lib's APIs lack Produce, ApiVersions or Metadata: %v", u.APIs)
		}
		if len(u.ClientIDs) != 1 || u.ClientIDs[0] != "usage-app" || u.Connections < 1 {
			t.Errorf("usage-lib: ids %v, %d connections", u.ClientIDs, u.Connections)
		}
	}
	if !found {
		t.Fatalf("usage-lib not recorded: %+v", b.Clients())
	}
	cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := int64(-1)
		for _, u := range b.Clients() {
			if u.Name == "usage-lib" {
				open = u.Connections
			}
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage-lib still has %d open connections after the client closed", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
