package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cmdFlags is a command's flag set plus the global flags every command takes.
type cmdFlags struct {
	*flag.FlagSet
	env *env
	cmd *command
}

// newFlags returns a flag set for cmd with -b/--bootstrap and --timeout
// registered. Errors are reported by run, not by the flag package.
func newFlags(e *env, cmd *command) *cmdFlags {
	fs := flag.NewFlagSet("vltava "+cmd.path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := &cmdFlags{FlagSet: fs, env: e, cmd: cmd}
	fs.StringVar(&e.bootstrap, "b", e.bootstrap, "bootstrap broker(s) `HOST:PORT`, comma-separated (env VLTAVA_BOOTSTRAP)")
	fs.StringVar(&e.bootstrap, "bootstrap", e.bootstrap, "same as -b")
	fs.DurationVar(&e.timeout, "timeout", e.timeout, "give up waiting for a broker after this `DURATION`")
	fs.Var(&e.x, "X", "client security `key=value`, repeatable, as kcat's: security.protocol (plaintext, ssl, sasl_plaintext, sasl_ssl),\n"+
		"ssl.ca.location, ssl.certificate.location, ssl.key.location, ssl.endpoint.identification.algorithm (https or none),\n"+
		"sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sasl.username, sasl.password")
	if e.onFlags != nil {
		e.onFlags(fs)
	}
	e.flags = f
	return f
}

// printHelp prints the command's usage and flags, long names with the "--"
// spelling.
func (f *cmdFlags) printHelp(w io.Writer) {
	c := f.cmd
	fmt.Fprintf(w, "usage: vltava %s [flags]\n%s\n\nflags:\n", strings.TrimSpace(c.path+" "+c.args), c.summary)
	printFlagDefaults(w, f.FlagSet)
}

// printFlagDefaults is flag.PrintDefaults with "-x" for one-letter flags and
// "--name" for the others.
func printFlagDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(fl *flag.Flag) {
		dash := "--"
		if len(fl.Name) == 1 {
			dash = "-"
		}
		name, usage := flag.UnquoteUsage(fl)
		line := "  " + dash + fl.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		_, isBool := fl.Value.(interface{ IsBoolFlag() bool })
		if !isBool && fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "-1" {
			if strings.ContainsAny(fl.DefValue, " %\\") {
				line += fmt.Sprintf(" (default %q)", fl.DefValue)
			} else {
				line += fmt.Sprintf(" (default %s)", fl.DefValue)
			}
		}
		fmt.Fprintln(w, line)
	})
}

// parse parses flags that may be mixed with positional arguments
// ("topic create demo -p 3") and checks the positional count is within
// [min, max] (max < 0: unbounded). -h returns errHelp after printing the
// help on stdout.
func (f *cmdFlags) parse(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.printHelp(f.env.stdout)
				return nil, errHelp
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		want := f.cmd.args
		if want == "" {
			want = "no arguments"
		}
		if len(pos) > 0 {
			return nil, usagef("want %s, got %q", want, pos)
		}
		return nil, usagef("want %s", want)
	}
	if f.env.timeout <= 0 {
		return nil, usagef("--timeout must be positive")
	}
	return pos, nil
}

// reachability remembers the last failed connection to a broker, so that
// a timeout can say which address could not be reached and why.
type reachability struct {
	mu      sync.Mutex
	addr    string
	err     error
	reached bool // some connection succeeded
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (r *reachability) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.reached = true
		return
	}
	if errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return // the command gave up: not the broker's doing
	}
	r.addr = net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	r.err = err
}

// client connects to the bootstrap brokers with extra options.
func (e *env) client(opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, s := range strings.Split(e.bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, usagef("no bootstrap broker given")
	}
	sec, err := securityOpts(e.x)
	if err != nil {
		return nil, err
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.WithHooks(&e.reach),
		kgo.DialTimeout(min(e.timeout, 10*time.Second)),
	}
	return kgo.NewClient(append(append(base, sec...), opts...)...)
}

// admin runs fn with an admin client and a context bounded by --timeout.
func (e *env) admin(ctx context.Context, fn func(ctx context.Context, adm *kadm.Client) error) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return fn(ctx, kadm.NewClient(cl))
}

// explain rewrites a timeout into a message naming the broker address that
// could not be reached (or that did not answer) within --timeout.
func (e *env) explain(err error) error {
	if err == nil {
		return nil
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrRecordTimeout) &&
		!errors.Is(err, errNoBroker) {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" && op.Addr != nil {
			return fmt.Errorf("could not reach broker %s: %w", op.Addr, err)
		}
		return err
	}
	e.reach.mu.Lock()
	defer e.reach.mu.Unlock()
	if e.reach.err != nil {
		return fmt.Errorf("could not reach broker %s within %s (--timeout): %v", e.reach.addr, e.timeout, e.reach.err)
	}
	if !e.reach.reached {
		return fmt.Errorf("no answer from broker %s within %s (--timeout)", e.bootstrap, e.timeout)
	}
	return fmt.Errorf("no answer from the brokers (%s) within %s (--timeout): %w", e.bootstrap, e.timeout, err)
}

// errNoBroker marks a failure to reach any broker.
var errNoBroker = errors.New("no broker reachable")

// listFlag collects a repeatable flag's values in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// keyValues parses "key=value" items; the error names the bad item.
func keyValues(items []string) ([][2]string, error) {
	out := make([][2]string, 0, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", it)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// adminClient is admin with the underlying client too (for requests to one
// broker).
func (e *env) adminClient(ctx context.Context, fn func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return fn(ctx, cl, kadm.NewClient(cl))
}

// jsonOut prints v as one line of JSON.
func jsonOut(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
