// Package conformance runs scenario scripts (testdata/*.txtar) against a
// Kafka-protocol system and says, scenario by scenario, whether it keeps
// Kafka's promises. Scripts are testscript files with the commands this
// package adds (cluster, broker, topic, produce, consume, await, check,
// raw, ...); README.md lists them. A Suite binds the scripts to one
// target (see package target) and its capabilities.
package conformance

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/vltava/vltava/conformance/checker"
	"github.com/vltava/vltava/conformance/target"
)

// Scripts are the scenario scripts, embedded so the vltava CLI carries them.
//
//go:embed testdata/*.txtar
var Scripts embed.FS

// EnvScale multiplies record counts in scripts (default 1: CI sizes).
const EnvScale = "VLTAVA_CONFORMANCE_SCALE"

// Suite runs the scripts against one target.
type Suite struct {
	Target target.Target
	Caps   target.Caps
	Scale  int // record counts in scripts are multiplied by Scale
	// Prefix starts every topic and group name the scripts use. New
	// makes it run-unique on external targets ("vc-<time>-"), whose
	// clusters outlive the run; Keep leaves what a run created there
	// (by default each script deletes its topics and groups at its end).
	Prefix string
	Keep   bool
	// MinBrokers runs the single-broker scenarios ('cluster start 1')
	// on clusters of this many brokers (the vltava three-node report);
	// multi-broker scenarios keep the topology and timing they state.
	MinBrokers int

	mu        sync.Mutex
	anomalies map[string][]string // script name -> anomaly names found by check
}

// New returns a suite for t with capabilities caps (see target.Probe).
// The scale comes from VLTAVA_CONFORMANCE_SCALE.
func New(t target.Target, caps target.Caps) *Suite {
	scale, _ := strconv.Atoi(os.Getenv(EnvScale))
	s := &Suite{Target: t, Caps: caps, Scale: max(scale, 1), anomalies: map[string][]string{}}
	if t.Name() == "external" {
		s.Prefix = "vc-" + strconv.FormatInt(time.Now().Unix(), 36) + "-"
	}
	return s
}

// Params returns the testscript parameters running the scripts in dir.
func (s *Suite) Params(dir string) testscript.Params {
	return testscript.Params{
		Dir:                dir,
		RequireUniqueNames: true,
		Setup: func(e *testscript.Env) error {
			st := &state{suite: s, clock: checker.NewClock(), work: e.WorkDir, jobs: map[string]*job{}, t: e.T()}
			e.Values[stateKey{}] = st
			e.Setenv("TARGET", s.Target.Name())
			e.Defer(st.close)
			return nil
		},
		Condition: s.condition,
		Cmds:      commands(),
	}
}

// condition answers [cap:NAME] and [target:NAME]; an unknown
// capability name is an error, so a misspelt guard fails loudly.
func (s *Suite) condition(cond string) (bool, error) {
	if name, ok := strings.CutPrefix(cond, "cap:"); ok {
		if !target.ValidCap(name) {
			return false, fmt.Errorf("unknown capability %q", name)
		}
		return s.Caps[name], nil
	}
	if name, ok := strings.CutPrefix(cond, "target:"); ok {
		return s.Target.Name() == name, nil
	}
	return false, fmt.Errorf("unknown condition %q (want cap:NAME or target:NAME)", cond)
}

// noteAnomalies records the anomalies a check found in script name.
func (s *Suite) noteAnomalies(name string, found []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.anomalies[name] = append(s.anomalies[name], found...)
}

// Anomalies returns the anomaly names checks found in script name.
func (s *Suite) Anomalies(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.anomalies[name]...)
}

// WriteScripts copies the embedded scripts into dir (for runs outside
// the source tree) and returns dir.
func WriteScripts(dir string) (string, error) {
	err := fs.WalkDir(Scripts, "testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := Scripts.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("conformance: %w", err)
	}
	return dir, nil
}
