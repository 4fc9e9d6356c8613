package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminTimeout bounds each admin command, so a broker that does not answer
// gives an error instead of a hang.
const adminTimeout = 30 * time.Second

// cmdFlags is a command's flag set plus the global flags every command takes.
type cmdFlags struct {
	*flag.FlagSet
	env *env
	cmd *command
}

// newFlags returns a flag set for cmd with -b/--bootstrap registered.
func newFlags(e *env, cmd *command) *cmdFlags {
	fs := flag.NewFlagSet("vltava "+cmd.path, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	f := &cmdFlags{FlagSet: fs, env: e, cmd: cmd}
	fs.StringVar(&e.bootstrap, "b", e.bootstrap, "bootstrap broker(s), comma-separated (env VLTAVA_BOOTSTRAP)")
	fs.StringVar(&e.bootstrap, "bootstrap", e.bootstrap, "same as -b")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: vltava %s %s [flags]\n%s\n\nflags:\n", cmd.path, cmd.args, cmd.summary)
		fs.PrintDefaults()
	}
	return f
}

// parse parses flags that may be mixed with positional arguments
// ("topic create demo -p 3") and checks the positional count is within
// [min, max] (max < 0: unbounded).
func (f *cmdFlags) parse(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errUsage
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
		f.Usage()
		return nil, errUsage
	}
	return pos, nil
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
		return nil, errors.New("no bootstrap broker given")
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
}

// admin runs fn with an admin client and a bounded context.
func (e *env) admin(ctx context.Context, fn func(ctx context.Context, adm *kadm.Client) error) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return fn(ctx, kadm.NewClient(cl))
}

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
