package acceptance

import (
	"os/exec"
	"testing"
	"time"
)

// TestClientsRoundTrip has franz-go, sarama and kcat each write 100,000
// records (10,000 under -short) of mixed sizes, one codec per partition,
// to a real vltavad, then reads every topic back with its writer and with
// one other client and checks offsets, keys, values, headers and
// timestamps record by record.
func TestClientsRoundTrip(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	per := n / len(codecs)
	ts0 := time.Now().Add(-time.Hour).UnixMilli()
	loads := map[string]*workload{
		"franz-go": {topic: "rt-franz-go", perPart: per, ts0: ts0, nullKeys: true},
		"sarama":   {topic: "rt-sarama", perPart: per, ts0: ts0 + 1_000_000, nullKeys: true},
		"kcat":     {topic: "rt-kcat", perPart: per, kcatHeaders: true},
	}
	kcat, kcatErr := exec.LookPath("kcat")

	d := startDaemon(t, nil)
	addr := d.Addr()
	adm := newAdmin(t, addr)
	for _, w := range loads {
		createTopic(t, adm, w.topic, int32(len(codecs)), nil)
	}

	writers := []struct {
		name    string
		produce func(t *testing.T, addr string, w *workload)
	}{
		{"franz-go", franzProduce},
		{"sarama", saramaProduce},
		{"kcat", func(t *testing.T, addr string, w *workload) { kcatProduce(t, kcat, addr, w) }},
	}
	for _, wr := range writers {
		t.Run("produce/"+wr.name, func(t *testing.T) {
			if wr.name == "kcat" && kcatErr != nil {
				t.Skipf("kcat not found (Debian package kcat): %v", kcatErr)
			}
			w := loads[wr.name]
			wr.produce(t, addr, w)
			w.written = !t.Failed()
		})
	}

	readers := map[string]func(t *testing.T, addr string, w *workload) map[int32][]got{
		"franz-go": franzConsume,
		"sarama":   saramaConsume,
		"kcat":     func(t *testing.T, addr string, w *workload) map[int32][]got { return kcatConsume(t, kcat, addr, w) },
	}
	// Each client reads its own topic and one other's.
	for _, rw := range [][2]string{
		{"franz-go", "franz-go"}, {"franz-go", "sarama"},
		{"sarama", "sarama"}, {"sarama", "kcat"},
		{"kcat", "kcat"}, {"kcat", "franz-go"},
	} {
		reader, writer := rw[0], rw[1]
		t.Run("read/"+reader+"/from-"+writer, func(t *testing.T) {
			if (reader == "kcat" || writer == "kcat") && kcatErr != nil {
				t.Skipf("kcat not found (Debian package kcat): %v", kcatErr)
			}
			w := loads[writer]
			if !w.written {
				t.Skipf("%s did not write its topic (see produce/%s)", writer, writer)
			}
			recs := readers[reader](t, addr, w)
			w.check(t, reader, recs, true)
		})
	}
}
