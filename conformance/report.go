package conformance

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// Result is the outcome of one scenario.
type Result struct {
	Scenario  string
	Status    string // pass, fail or skip
	Elapsed   time.Duration
	Reason    string   // skip reason or failure line
	Anomalies []string // anomaly names checks found
}

// Run runs every script in dir outside 'go test' and returns the results
// in order. Scripts run one at a time; log receives each script's log
// when it fails (or always, if verbose).
func (s *Suite) Run(dir string, log io.Writer, verbose bool) []Result {
	root := &reportT{log: log, verbose: verbose}
	func() {
		defer root.recover()
		testscript.RunT(root, s.Params(dir))
	}()
	for i := range root.results {
		root.results[i].Anomalies = s.Anomalies(root.results[i].Scenario)
	}
	if root.failed && len(root.results) == 0 {
		root.results = append(root.results, Result{Scenario: "(suite)", Status: "fail", Reason: root.buf.String()})
	}
	return root.results
}

type stop struct{ skip bool }

// reportT implements testscript.T for a run outside 'go test'.
type reportT struct {
	log      io.Writer
	verbose  bool
	buf      strings.Builder
	failed   bool
	skipped  string
	results  []Result
	children bool
}

func (t *reportT) Skip(args ...any) {
	t.skipped = strings.TrimSpace(fmt.Sprintln(args...))
	panic(stop{skip: true})
}
func (t *reportT) Fatal(args ...any) { t.buf.WriteString(fmt.Sprintln(args...)); t.FailNow() }
func (t *reportT) Parallel()         {}
func (t *reportT) Log(args ...any)   { t.buf.WriteString(fmt.Sprintln(args...)) }
func (t *reportT) FailNow()          { t.failed = true; panic(stop{}) }
func (t *reportT) Verbose() bool     { return t.verbose }

func (t *reportT) recover() {
	if r := recover(); r != nil {
		if _, ok := r.(stop); !ok {
			panic(r)
		}
	}
}

// Run runs one scenario to completion, turning FailNow/Skip into a result.
func (t *reportT) Run(name string, f func(testscript.T)) {
	child := &reportT{log: t.log, verbose: t.verbose}
	start := time.Now()
	func() {
		defer child.recover()
		f(child)
	}()
	r := Result{Scenario: name, Status: "pass", Elapsed: time.Since(start)}
	switch {
	case child.failed:
		r.Status, r.Reason = "fail", failLine(child.buf.String())
		t.failed = true
	case child.skipped != "":
		r.Status, r.Reason = "skip", child.skipped
	}
	if child.failed || t.verbose {
		fmt.Fprintf(t.log, "=== %s: %s\n%s\n", name, r.Status, child.buf.String())
	}
	t.results = append(t.results, r)
}

var failRE = regexp.MustCompile(`(?m)^\s*FAIL: (.*)$`)

func failLine(log string) string {
	if m := failRE.FindAllStringSubmatch(log, -1); len(m) > 0 {
		return m[len(m)-1][1]
	}
	return "failed"
}

// WriteReport writes results as a Markdown table ending with the line
// "N passed, N failed, N skipped".
func WriteReport(w io.Writer, target string, results []Result) {
	fmt.Fprintln(w, "| scenario | target | result | time | anomalies | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	var pass, fail, skip int
	for _, r := range results {
		switch r.Status {
		case "pass":
			pass++
		case "fail":
			fail++
		case "skip":
			skip++
		}
		an := strings.Join(r.Anomalies, ",")
		if an == "" {
			an = "-"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.1fs | %s | %s |\n", r.Scenario, target, r.Status,
			r.Elapsed.Seconds(), an, strings.ReplaceAll(r.Reason, "|", `\|`))
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", pass, fail, skip)
}
