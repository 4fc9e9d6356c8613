package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/vltava/vltava/conformance/target"
)

// Result is the outcome of one scenario.
type Result struct {
	Scenario  string        `json:"scenario"`
	Status    string        `json:"status"` // Pass, Fail, Skip or Known
	Elapsed   time.Duration `json:"elapsed_ns"`
	Reason    string        `json:"reason,omitempty"`    // skip reason or failure line
	Anomalies []string      `json:"anomalies,omitempty"` // anomaly names checks found
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
		root.results[i].classify()
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

var (
	failRE  = regexp.MustCompile(`(?m)^\s*FAIL: (.*)$`)
	fileRE  = regexp.MustCompile(`^(?:[^ :]*/)?([A-Za-z0-9_.-]+\.txtar):([0-9]+):`)
	findRE  = regexp.MustCompile(`^FINDINGS\.md [A-Z][0-9]+`)
	reasonR = strings.NewReplacer("|", `\|`, "\n", " ")
)

// failLine is the last FAIL line of a script's log, its file named as
// conformance/testdata/NAME.txtar:LINE (runs outside the source tree
// execute copies in a temporary directory).
func failLine(log string) string {
	m := failRE.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return "failed"
	}
	return fileRE.ReplaceAllString(m[len(m)-1][1], "conformance/testdata/$1:$2:")
}

// Status values of a Result.
const (
	Pass  = "pass"
	Fail  = "fail"
	Skip  = "skip"
	Known = "known" // skipped on this target by a FINDINGS.md guard: a documented deviation
)

// known turns a skip whose reason cites a FINDINGS.md entry into Known.
func (r *Result) classify() {
	if r.Status == Skip && findRE.MatchString(r.Reason) {
		r.Status = Known
	}
}

// Summary counts results by status.
type Summary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Skip  int `json:"skip"`
	Known int `json:"known"`
}

// Summarize counts results by status.
func Summarize(results []Result) Summary {
	var s Summary
	for _, r := range results {
		switch r.Status {
		case Pass:
			s.Pass++
		case Fail:
			s.Fail++
		case Skip:
			s.Skip++
		case Known:
			s.Known++
		}
	}
	return s
}

// Line is the last line of every report: "N passed, N failed, N
// skipped, N known findings".
func (s Summary) Line() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped, %d known findings", s.Pass, s.Fail, s.Skip, s.Known)
}

// Report is one run: the target's description and the results.
type Report struct {
	Title   string              `json:"title,omitempty"`
	Target  *target.Description `json:"target"`
	Results []Result            `json:"results"`
	Summary Summary             `json:"summary"`
}

// NewReport assembles a report.
func NewReport(title string, d *target.Description, results []Result) *Report {
	return &Report{Title: title, Target: d, Results: results, Summary: Summarize(results)}
}

// WriteMarkdown writes the report for people: a header describing the
// target, then a table (scenario, result, time, anomalies, note), then
// the summary line.
func (rep *Report) WriteMarkdown(w io.Writer) {
	if rep.Title != "" {
		fmt.Fprintf(w, "# %s\n\n", rep.Title)
	}
	if rep.Target != nil {
		fmt.Fprintf(w, "%s\n", rep.Target.Markdown())
	}
	WriteReport(w, rep.Results)
}

// WriteJSON writes the report for machines.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteReport writes results as a Markdown table ending with the
// summary line.
func WriteReport(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| scenario | result | time | anomalies | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range results {
		an := strings.Join(r.Anomalies, ",")
		if an == "" {
			an = "-"
		}
		fmt.Fprintf(w, "| %s | %s | %.1fs | %s | %s |\n", r.Scenario, r.Status,
			r.Elapsed.Seconds(), an, reasonR.Replace(r.Reason))
	}
	fmt.Fprintf(w, "\n%s\n", Summarize(results).Line())
}

// WriteJUnit writes the results as JUnit XML for CI systems: one
// testsuite named for the target; failures carry the failure line and
// skips (known findings included) their reason.
func (rep *Report) WriteJUnit(w io.Writer) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	type skipped struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Time      string   `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Skipped   *skipped `xml:"skipped,omitempty"`
	}
	type property struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	type testsuite struct {
		XMLName    xml.Name   `xml:"testsuite"`
		Name       string     `xml:"name,attr"`
		Tests      int        `xml:"tests,attr"`
		Failures   int        `xml:"failures,attr"`
		Skipped    int        `xml:"skipped,attr"`
		Properties []property `xml:"properties>property"`
		Cases      []testcase `xml:"testcase"`
	}
	name := "conformance"
	var props []property
	if rep.Target != nil {
		name += "." + rep.Target.Target
		props = append(props, property{"software", rep.Target.Software},
			property{"bootstrap", strings.Join(rep.Target.Bootstrap, ",")},
			property{"capabilities", rep.Target.Caps.String()})
	}
	ts := testsuite{Name: name, Tests: len(rep.Results), Failures: rep.Summary.Fail,
		Skipped: rep.Summary.Skip + rep.Summary.Known, Properties: props}
	for _, r := range rep.Results {
		c := testcase{Name: r.Scenario, Classname: name, Time: fmt.Sprintf("%.3f", r.Elapsed.Seconds())}
		switch r.Status {
		case Fail:
			c.Failure = &failure{Message: r.Reason, Text: strings.Join(r.Anomalies, ",")}
		case Skip, Known:
			c.Skipped = &skipped{Message: r.Reason}
		}
		ts.Cases = append(ts.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(ts); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
