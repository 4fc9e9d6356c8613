package conformance

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/vltava/vltava/conformance/checker"
	"github.com/vltava/vltava/conformance/target"
)

type stateKey struct{}

// state is one script run's world: its cluster, clients and background jobs.
type state struct {
	suite *Suite
	clock *checker.Clock
	work  string
	t     testscript.T // to skip the scenario when a precondition fails

	mu      sync.Mutex
	cluster target.Cluster
	admin   *kgo.Client
	jobs    map[string]*job
	pid     *producerID // for raw idempotent produce
	nproc   int         // counter for default process names
	sasl    bool        // the cluster requires SASL/PLAIN: clients log in
	users   map[string]string
	created []string        // topics this script created (deleted at the end on external targets)
	groups  map[string]bool // groups this script used
	txns    map[string]*txnProducer
	rawTxns map[string]*rawTxn
}

// job is a background command (produce ... &name&).
type job struct {
	done chan struct{}
	err  error
	out  string
}

func st(ts *testscript.TestScript) *state { return ts.Value(stateKey{}).(*state) }

// close waits for background jobs and stops the cluster (deferred by Setup).
func (s *state) close() {
	s.mu.Lock()
	jobs := s.jobs
	s.mu.Unlock()
	for _, j := range jobs {
		<-j.done
	}
	for _, t := range s.txns {
		t.cl.Close()
	}
	s.cleanup()
	if s.admin != nil {
		s.admin.Close()
	}
	if s.cluster != nil {
		s.cluster.Close()
	}
}

// skip ends the scenario as skipped with reason (a precondition the
// target does not meet).
func (s *state) skip(reason string) { s.t.Skip(reason) }

func (s *state) needCluster(ts *testscript.TestScript) target.Cluster {
	if s.cluster == nil {
		ts.Fatalf("no cluster: run 'cluster start N' first")
	}
	return s.cluster
}

// client returns the script's shared admin client.
func (s *state) client(ts *testscript.TestScript) *kgo.Client {
	c := s.needCluster(ts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin == nil {
		cl, err := kgo.NewClient(s.clientOpts(c, "")...)
		ts.Check(err)
		s.admin = cl
	}
	return s.admin
}

func (s *state) adm(ts *testscript.TestScript) *kadm.Client { return kadm.NewClient(s.client(ts)) }

// clientOpts are the options every client of the suite starts from:
// quick metadata refresh so failover is noticed promptly. On a SASL
// cluster the client logs in as user ("" for the superuser; "NAME" with
// the password given at cluster start, or "NAME:PASSWORD").
func (s *state) clientOpts(c target.Cluster, user string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	if s.sasl || user != "" {
		name, pass := target.Superuser, target.SuperuserPassword
		if user != "" {
			var ok bool
			if name, pass, ok = strings.Cut(user, ":"); !ok {
				pass = s.users[name]
			}
		}
		opts = append(opts, kgo.SASL(plain.Auth{User: name, Pass: pass}.AsMechanism()))
	}
	return opts
}

// topic maps a script's topic name to the real one: the suite's
// run-unique prefix (external targets) keeps runs apart.
func (s *state) topic(ts *testscript.TestScript, name string) string {
	return s.suite.Prefix + name
}

// group maps a script's group name to the real one, as topic does, and
// remembers it for the clean-up.
func (s *state) group(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups = map[string]bool{}
	}
	g := s.suite.Prefix + name
	s.groups[g] = true
	return g
}

// cleanup deletes the groups and topics the script created on an
// external cluster (the only kind that outlives the script), unless the
// suite keeps them.
func (s *state) cleanup() {
	if s.cluster == nil || s.suite.Keep || s.suite.Target.Name() != "external" || s.admin == nil {
		return
	}
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	adm := kadm.NewClient(s.admin)
	if len(s.groups) > 0 {
		_, _ = adm.DeleteGroups(ctx, slices.Sorted(maps.Keys(s.groups))...)
	}
	if len(s.created) > 0 {
		_, _ = adm.DeleteTopics(ctx, s.created...)
	}
}

func (s *state) procName(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nproc++
	return fmt.Sprintf("%s%d", prefix, s.nproc)
}

func (s *state) path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.work, name)
}

// ctx returns a context bounded by d.
func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// parse parses flags after npos positional arguments, failing the script
// with the usage on error.
func parse(ts *testscript.TestScript, fs *flag.FlagSet, args []string, npos int, usage string) []string {
	fs.SetOutput(io.Discard)
	if len(args) < npos {
		ts.Fatalf("usage: %s", usage)
	}
	if err := fs.Parse(args[npos:]); err != nil {
		ts.Fatalf("%v; usage: %s", err, usage)
	}
	if fs.NArg() > 0 {
		ts.Fatalf("unexpected argument %q; usage: %s", fs.Arg(0), usage)
	}
	return args[:npos]
}

// kvFlag collects repeated -config key=value flags.
type kvFlag map[string]string

func (k kvFlag) String() string { return fmt.Sprint(map[string]string(k)) }
func (k kvFlag) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want key=value, got %q", v)
	}
	k[key] = val
	return nil
}

// background reports whether args end in &name& and returns the name.
func background(args []string) ([]string, string) {
	if n := len(args); n > 0 {
		a := args[n-1]
		if len(a) > 2 && strings.HasPrefix(a, "&") && strings.HasSuffix(a, "&") {
			return args[:n-1], a[1 : len(a)-1]
		}
	}
	return args, ""
}

// runJob runs f now, or in the background as name when name is set. f's
// output goes to the script's stdout when run in the foreground.
func (s *state) runJob(ts *testscript.TestScript, neg bool, name string, f func() (string, error)) {
	if name == "" {
		out, err := f()
		fmt.Fprint(ts.Stdout(), out)
		finish(ts, neg, err)
		return
	}
	if neg {
		ts.Fatalf("! with a background job: put the ! on 'await job %s'", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jobs[name] != nil {
		ts.Fatalf("duplicate job %q", name)
	}
	j := &job{done: make(chan struct{})}
	s.jobs[name] = j
	go func() { // owned by state: close and 'await job' wait on done
		defer close(j.done)
		j.out, j.err = f()
	}()
}

// finish applies the script's expectation (neg: must fail) to err.
func finish(ts *testscript.TestScript, neg bool, err error) {
	switch {
	case err != nil && !neg:
		ts.Fatalf("%v", err)
	case err == nil && neg:
		ts.Fatalf("unexpected success")
	case err != nil:
		ts.Logf("failed as expected: %v", err)
	}
}

// scaled multiplies a script's record count by the suite scale.
func (s *state) scaled(n int) int { return n * s.suite.Scale }
