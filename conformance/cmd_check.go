package conformance

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/vltava/vltava/conformance/checker"
)

const checkUsage = "check [-allow NAME,...] [-acked N] [-read N] [-all-read] HISTORY..."

// check [-allow NAME,...] [-acked N] [-read N] HISTORY...: merges the
// history files, runs every anomaly detector, prints the summary and the
// first anomalies of each kind, and fails on any anomaly not allowed or a
// count not met. With ! it passes only if it
// would have failed (a deliberately broken history).
func cmdCheck(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	allow := fs.String("allow", "", "anomaly names that do not fail the check")
	acked := fs.Int("acked", -1, "exact number of acknowledged sends")
	read := fs.Int("read", -1, "exact number of distinct values read")
	allRead := fs.Bool("all-read", false, "every send that did not fail (acked or unknown) was read")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		ts.Fatalf("%v; usage: %s", err, checkUsage)
	}
	files := fs.Args()
	if len(files) == 0 {
		ts.Fatalf("usage: %s", checkUsage)
	}
	s := st(ts)
	for j := range files {
		files[j] = s.path(files[j])
	}
	ops, err := checker.ReadFiles(files...)
	ts.Check(err)
	r := checker.Check(ops)
	s.suite.noteAnomalies(ts.Name(), r.Names())
	out := ts.Stdout()
	fmt.Fprintln(out, r.Summary())
	shown := map[string]int{}
	for _, a := range r.Anomalies {
		if shown[a.Name]++; shown[a.Name] <= 5 {
			fmt.Fprintf(out, "  %s: %s\n", a.Name, a.Detail)
		}
	}
	allowed := strings.Split(*allow, ",")
	var problems []string
	for _, n := range r.Names() {
		if !slices.Contains(allowed, n) {
			problems = append(problems, fmt.Sprintf("%s x%d", n, r.Count(n)))
		}
	}
	if *acked >= 0 && r.Acked != *acked {
		problems = append(problems, fmt.Sprintf("acked %d, want %d", r.Acked, *acked))
	}
	if *read >= 0 && r.Read != *read {
		problems = append(problems, fmt.Sprintf("read %d, want %d", r.Read, *read))
	}
	if *allRead && r.Read < r.Sends-r.Failed {
		problems = append(problems, fmt.Sprintf("read %d of %d sends that did not fail", r.Read, r.Sends-r.Failed))
	}
	switch {
	case len(problems) > 0 && !neg:
		ts.Fatalf("check: %s", strings.Join(problems, "; "))
	case len(problems) == 0 && neg:
		ts.Fatalf("check: no anomaly found, but one was expected")
	}
}
