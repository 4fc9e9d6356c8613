package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/vltava/vltava/conformance"
	"github.com/vltava/vltava/conformance/target"
)

var conformanceCommands = []command{
	{path: "conformance", summary: "run the conformance scenarios against kfake, vltava or an external cluster and print a report", run: runConformance},
}

// conformanceHelp follows the flags in 'vltava conformance -h'.
const conformanceHelp = `
Targets:
  vltava    vltavad processes started per scenario (--vltavad, else vltavad on PATH, else go build)
  kfake     franz-go's fake cluster, in process
  external  a running cluster: needs an explicit bootstrap, -b HOST:PORT[,...] or
            $VLTAVA_CONFORMANCE_BOOTSTRAP (-b wins when both are set; there is no default).
            Topics and groups get a run-unique prefix (vc-<time>-) and each scenario
            deletes what it created unless --keep.

Environment of the external target:
  VLTAVA_CONFORMANCE_BOOTSTRAP    seed brokers, when -b is not given
  VLTAVA_CONFORMANCE_KILL_CMD     hook that kills broker $BROKER as a crash would (SIGKILL): capability kill9
  VLTAVA_CONFORMANCE_STOP_CMD     hook that pauses broker $BROKER (SIGSTOP); with
  VLTAVA_CONFORMANCE_CONT_CMD     the hook that resumes it (SIGCONT): capability stop
  VLTAVA_CONFORMANCE_RESTART_CMD  hook that restarts broker $BROKER cleanly: capability restart
  VLTAVA_CONFORMANCE_CAPS         comma-separated capabilities the cluster has that the suite
                                  cannot probe, e.g. multibroker,replication (unknown names are an error)
  Hooks run with sh -c and BROKER set to the node ID the cluster reports. Without a hook the
  capability is missing and the scenarios needing it are skipped with that reason.

Scenarios needing broker settings (e.g. log.retention.check.interval.ms for the retention
scenarios) check them with DescribeConfigs on an external cluster and are skipped, with the
setting named, when the cluster does not have them.

Capabilities (a scenario guarded by [!cap:NAME] is skipped without it):
`

// runConformance runs the embedded scenario scripts against a target and
// prints a report ending with "N passed, N failed, N skipped, N known
// findings"; it fails if any scenario failed.
func runConformance(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	tname := f.String("target", "vltava", "kfake, vltava or external")
	report := f.String("report", "", "also write the report to `FILE` (in --format)")
	format := f.String("format", "markdown", "report format: markdown or json")
	junit := f.String("junit", "", "also write JUnit XML to `FILE`")
	title := f.String("title", "", "report title (default: Conformance report: TARGET)")
	keep := f.Bool("keep", false, "external: keep the topics and groups the run created")
	brokers := f.Int("brokers", 0, "run the single-broker scenarios on `N` brokers (vltava, kfake)")
	vltavad := f.String("vltavad", "", "vltavad binary for --target vltava (default: vltavad on PATH, else go build)")
	run := f.String("run", "", "only scenarios matching `REGEXP`")
	verbose := f.Bool("v", false, "print every scenario's log")
	exitZero := f.Bool("exit-zero", false, "exit 0 even when scenarios fail (publishing reports)")
	for _, name := range []string{"b", "bootstrap"} { // no default here: see conformanceHelp
		fl := f.Lookup(name)
		fl.DefValue, fl.Usage = "", "bootstrap broker(s) of --target external, comma-separated (no default; wins over $"+target.EnvBootstrap+")"
	}
	f.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: vltava conformance [flags]\n%s\n\nflags:\n", c.summary)
		f.PrintDefaults()
		fmt.Fprint(e.stderr, conformanceHelp)
		known := target.KnownCaps()
		for _, k := range slices.Sorted(maps.Keys(known)) {
			fmt.Fprintf(e.stderr, "  %-16s %s\n", k, known[k])
		}
	}
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *format != "markdown" && *format != "json" {
		return fmt.Errorf("%w: --format %q: want markdown or json", errUsage, *format)
	}
	bootFlag := e.bootstrapSet
	f.Visit(func(fl *flag.Flag) { bootFlag = bootFlag || fl.Name == "b" || fl.Name == "bootstrap" })
	bootstrap, note := conformanceBootstrap(bootFlag, e.bootstrap, os.Getenv(target.EnvBootstrap))
	env := func(k string) string {
		if k == target.EnvBootstrap {
			return bootstrap
		}
		return os.Getenv(k)
	}
	if *tname == "external" {
		if bootstrap == "" {
			return fmt.Errorf("%w: --target external needs an explicit bootstrap: -b HOST:PORT or %s (there is no default)", errUsage, target.EnvBootstrap)
		}
		fmt.Fprintf(e.stderr, "bootstrap: %s\n", note)
	}
	tmp, err := os.MkdirTemp("", "vltava-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *tname == "vltava" && *vltavad == "" {
		if *vltavad, err = findVltavad(tmp); err != nil {
			return err
		}
	}
	tg, err := target.ByName(*tname, *vltavad, env)
	if err != nil {
		return err
	}
	dir := filepath.Join(tmp, "scripts")
	if err := writeScripts(dir, *run); err != nil {
		return err
	}
	desc, err := target.Describe(ctx, tg)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "target %s (%s) capabilities: %s\n", tg.Name(), desc.Software, desc.Caps)
	suite := conformance.New(tg, desc.Caps)
	suite.Keep, suite.MinBrokers = *keep, *brokers
	results := suite.Run(dir, e.stderr, *verbose)
	if *title == "" {
		*title = "Conformance report: " + tg.Name()
		if *brokers > 1 {
			*title += fmt.Sprintf(" (%d brokers)", *brokers)
		}
	}
	rep := conformance.NewReport(*title, desc, results)
	write := func(w io.Writer) error {
		if *format == "json" {
			return rep.WriteJSON(w)
		}
		rep.WriteMarkdown(w)
		return nil
	}
	if err := write(e.stdout); err != nil {
		return err
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{{*report, write}, {*junit, rep.WriteJUnit}} {
		if out.path == "" {
			continue
		}
		if err := writeFile(out.path, out.write); err != nil {
			return err
		}
	}
	if rep.Summary.Fail > 0 && !*exitZero {
		return errors.New("conformance: some scenarios failed")
	}
	return nil
}

// conformanceBootstrap picks the external target's bootstrap: the -b
// flag when given, else VLTAVA_CONFORMANCE_BOOTSTRAP, else none; note
// says which, and what was overridden.
func conformanceBootstrap(flagSet bool, flagVal, envVal string) (string, string) {
	switch {
	case flagSet && envVal != "" && envVal != flagVal:
		return flagVal, fmt.Sprintf("%s (from -b; %s=%s ignored: the flag wins)", flagVal, target.EnvBootstrap, envVal)
	case flagSet:
		return flagVal, flagVal + " (from -b)"
	case envVal != "":
		return envVal, fmt.Sprintf("%s (from %s)", envVal, target.EnvBootstrap)
	}
	return "", ""
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeScripts copies the embedded scripts matching re into dir.
func writeScripts(dir, re string) error {
	all := filepath.Join(filepath.Dir(dir), "all")
	for _, d := range []string{dir, all} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if _, err := conformance.WriteScripts(all); err != nil {
		return err
	}
	match, err := regexp.Compile(re)
	if err != nil {
		return fmt.Errorf("%w: --run: %v", errUsage, err)
	}
	entries, err := os.ReadDir(all)
	if err != nil {
		return err
	}
	n := 0
	for _, ent := range entries {
		if !match.MatchString(strings.TrimSuffix(ent.Name(), ".txtar")) {
			continue
		}
		if err := os.Rename(filepath.Join(all, ent.Name()), filepath.Join(dir, ent.Name())); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("conformance: no scenario matches %q", re)
	}
	return nil
}

// findVltavad looks for vltavad on PATH, else builds it (inside the module).
func findVltavad(tmp string) (string, error) {
	if p, err := exec.LookPath("vltavad"); err == nil {
		return p, nil
	}
	bin := filepath.Join(tmp, "vltavad")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/vltava/vltava/daemon")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("conformance: no vltavad on PATH and go build failed (pass --vltavad): %v\n%s", err, out)
	}
	return bin, nil
}
