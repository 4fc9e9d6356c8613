package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/vltava/vltava/conformance"
	"github.com/vltava/vltava/conformance/target"
)

var conformanceCommands = []command{
	{path: "conformance", summary: "run the conformance scenarios against kfake, vltava or an external cluster and print a report", run: runConformance},
}

// runConformance runs the embedded scenario scripts against a target and
// prints a table ending with "N passed, N failed, N skipped".
func runConformance(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	tname := f.String("target", "vltava", "kfake, vltava or external")
	report := f.String("report", "", "also write the Markdown report to `FILE`")
	vltavad := f.String("vltavad", "", "vltavad binary for --target vltava (default: vltavad on PATH, else go build)")
	run := f.String("run", "", "only scenarios matching `REGEXP`")
	verbose := f.Bool("v", false, "print every scenario's log")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	env := func(k string) string {
		if k == target.EnvBootstrap && os.Getenv(k) == "" {
			return e.bootstrap // -b/--bootstrap
		}
		return os.Getenv(k)
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
	caps, err := target.Probe(ctx, tg)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "target %s capabilities: %s\n", tg.Name(), caps)
	results := conformance.New(tg, caps).Run(dir, e.stderr, *verbose)
	out := io.Writer(e.stdout)
	if *report != "" {
		rf, err := os.Create(*report)
		if err != nil {
			return err
		}
		defer rf.Close()
		fmt.Fprintf(rf, "# Conformance report: %s\n\ncapabilities: %s\n\n", tg.Name(), caps)
		out = io.MultiWriter(e.stdout, rf)
	}
	conformance.WriteReport(out, tg.Name(), results)
	for _, r := range results {
		if r.Status == "fail" {
			return errors.New("conformance: some scenarios failed")
		}
	}
	return nil
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
