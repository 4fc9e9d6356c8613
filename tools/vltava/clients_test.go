package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

func TestClientsReport(t *testing.T) {
	maddr := daemontest.FreePort(t)
	p := daemontest.Start(t, daemontest.Build(t), "--metrics-listen", maddr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SoftwareNameAndVersion("report-lib", "9.9.9"),
		kgo.ClientID("report-app"), kgo.DefaultProduceTopic("report"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := cli(t, p.Addr(), "", "clients", "--metrics", maddr)
	line := lineWith(out, "report-lib")
	if !strings.Contains(line, "9.9.9") || !strings.Contains(line, "report-app") || !strings.Contains(line, "Produce:") {
		t.Errorf("clients does not report report-lib 9.9.9 with its Produce use:\n%s", out)
	}
	// Which version of Produce did it use? Ask about it and about one it
	// did not use.
	var used string
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "Produce:"); ok {
			used = v
		}
	}
	out = cli(t, p.Addr(), "", "clients", "--metrics", maddr, "--if-removed", "Produce:"+used)
	if !strings.Contains(out, "BREAKS  report-lib 9.9.9") {
		t.Errorf("--if-removed Produce:%s does not name report-lib:\n%s", used, out)
	}
	out = cli(t, p.Addr(), "", "clients", "--metrics", maddr, "--if-removed", "0:1")
	if strings.Contains(out, "report-lib") {
		t.Errorf("--if-removed Produce:1 names report-lib, which never used it:\n%s", out)
	}
	if _, _, err := cliErr(t, p.Addr(), "", "clients", "--metrics", maddr, "--if-removed", "Nope:1"); err == nil {
		t.Error("an unknown API name was accepted")
	}
}
