package conformance

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestFailLinePointsIntoTestdata(t *testing.T) {
	log := "> cluster start 1\nFAIL: /tmp/vltava-conformance-123/scripts/offsets_retention_ms.txtar:8: await log-start: not within 30s\n"
	want := "conformance/testdata/offsets_retention_ms.txtar:8: await log-start: not within 30s"
	if got := failLine(log); got != want {
		t.Fatalf("failLine = %q, want %q", got, want)
	}
}

func TestKnownFindingsAndJUnit(t *testing.T) {
	rs := []Result{
		{Scenario: "a", Status: Pass},
		{Scenario: "b", Status: Skip, Reason: "FINDINGS.md K6: kfake rebalances"},
		{Scenario: "c", Status: Skip, Reason: "needs broker restart"},
		{Scenario: "d", Status: Fail, Reason: "conformance/testdata/d.txtar:3: boom", Anomalies: []string{"lost-write"}},
	}
	for i := range rs {
		rs[i].classify()
	}
	if rs[1].Status != Known || rs[2].Status != Skip {
		t.Fatalf("classify: %+v", rs)
	}
	rep := NewReport("t", nil, rs)
	if got := rep.Summary.Line(); got != "1 passed, 1 failed, 1 skipped, 1 known findings" {
		t.Fatalf("summary %q", got)
	}
	var b bytes.Buffer
	if err := rep.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
	}
	if err := xml.Unmarshal(b.Bytes(), &suite); err != nil || suite.Tests != 4 || suite.Failures != 1 || suite.Skipped != 2 {
		t.Fatalf("JUnit %+v %v:\n%s", suite, err, b.String())
	}
	b.Reset()
	rep.WriteMarkdown(&b)
	if !strings.Contains(b.String(), "| d | fail | 0.0s | lost-write | conformance/testdata/d.txtar:3: boom |") {
		t.Fatalf("markdown:\n%s", b.String())
	}
}
