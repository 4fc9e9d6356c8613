// Command vltava is a small Kafka command-line client for people: create and
// inspect topics, produce and consume records, and measure throughput. It
// speaks the Kafka protocol through franz-go, so it works against Vltava and
// any other Kafka-compatible broker.
//
//	vltava [-b HOST:PORT] [--timeout D] topic create NAME [-p N] [-r N] [-c key=value ...]
//	vltava produce TOPIC < lines
//	vltava consume TOPIC --from start -n 10
//	vltava perf produce TOPIC --records 100000 --record-size 1024
//	vltava group describe GROUP
//	vltava group reset-offsets GROUP --topic TOPIC --to-earliest [--execute]
//
// Every command that talks to a broker waits at most --timeout for it (like
// Kafka's max.block.ms and delivery.timeout.ms) and names the address it
// could not reach. A usage error prints the error and the command's usage;
// -h on any command prints its help and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/vltava/vltava/daemon/buildinfo"
)

// command is one leaf of the command tree, found by its space-separated path.
type command struct {
	path    string // "topic create"
	args    string // positional arguments, for usage
	summary string
	run     func(ctx context.Context, e *env, c *command, args []string) error
}

// commands is the whole command table; each group's file defines its rows.
var commands = concat(topicCommands, produceCommands, consumeCommands, perfCommands, perfLoadCommands, groupCommands,
	brokerCommands, partitionCommands, conformanceCommands, clusterCommands, quotaCommands, doctorCommands,
	clientsCommands, completionCommands, metadataCommands, userCommands, aclCommands)

func concat(groups ...[]command) []command {
	var all []command
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

// env is what a command runs with: its streams and the global settings.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	bootstrap      string              // from VLTAVA_BOOTSTRAP or the default; -b overrides per command
	timeout        time.Duration       // --timeout: the longest wait for a broker
	reach          reachability        // the last connection failure, for error messages
	onFlags        func(*flag.FlagSet) // if set, told each command's flag set (completion)
	flags          *cmdFlags           // the running command's flags, for its usage
	bootstrapSet   bool                // -b/--bootstrap given before the command
	x              listFlag            // -X client security settings (security.go)
}

// reported wraps an error whose message run already printed (a usage
// error, followed by the usage): main prints nothing more.
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// defaultTimeout bounds how long a command waits for a broker, like Kafka's
// max.block.ms (60 s).
const defaultTimeout = 60 * time.Second

// errUsage marks an error in how a command was invoked; run prints the
// command's usage after it.
var errUsage = errors.New("usage error")

// errHelp is returned by parse for -h/--help: the help is printed and the
// command succeeds.
var errHelp = errors.New("help requested")

// usagef returns a usage error with a message.
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.As(err, new(reported)) {
			fmt.Fprintln(os.Stderr, "vltava:", errorText(err))
		}
		os.Exit(1)
	}
}

// errorText is err's message without the "usage error: " prefix.
func errorText(err error) string {
	s := err.Error()
	if errors.Is(err, errUsage) {
		s = strings.TrimPrefix(s, errUsage.Error()+": ")
	}
	return s
}

// run executes one command line. Global flags (-b/--bootstrap, --timeout)
// may appear before the command path or among the command's own flags.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, bootstrap: defaultBootstrap(), timeout: defaultTimeout}
	// Leading global flags.
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch name {
		case "b", "bootstrap", "timeout", "X":
			if !hasVal {
				if len(args) < 2 {
					return globalUsage(stderr, usagef("flag %s needs a value", args[0]))
				}
				val, args = args[1], args[1:]
			}
			args = args[1:]
			switch name {
			case "timeout":
				d, err := time.ParseDuration(val)
				if err != nil || d <= 0 {
					return globalUsage(stderr, usagef("--timeout %q: want a positive duration such as 30s", val))
				}
				e.timeout = d
			case "X":
				e.x = append(e.x, val)
			default:
				e.bootstrap, e.bootstrapSet = val, true
			}
		case "h", "help":
			printUsage(stdout)
			return nil
		case "version":
			fmt.Fprintln(stdout, buildinfo.Line("vltava"))
			return nil
		default:
			return globalUsage(stderr, usagef("unknown global flag %s", args[0]))
		}
	}
	if len(args) == 0 || args[0] == "help" {
		if len(args) > 1 {
			if cmd, rest := lookup(args[1:]); cmd != nil && len(rest) == 0 {
				newFlags(e, cmd).printHelp(stdout)
				return nil
			}
		}
		printUsage(stdout)
		return nil
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		if prefixHelp(args, stdout) {
			return nil
		}
		return globalUsage(stderr, usagef("unknown command %q", strings.Join(args, " ")))
	}
	err := cmd.run(ctx, e, cmd, rest)
	switch {
	case errors.Is(err, errHelp):
		return nil
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "vltava %s: %s\n\n", cmd.path, errorText(err))
		if e.flags == nil {
			newFlags(e, cmd)
		}
		e.flags.printHelp(stderr)
		return reported{err}
	}
	return e.explain(err)
}

// globalUsage prints err and the overall usage, and returns err as
// reported.
func globalUsage(w io.Writer, err error) error {
	fmt.Fprintf(w, "vltava: %s\n\n", errorText(err))
	printUsage(w)
	return reported{err}
}

// prefixHelp prints the commands under a group ("topic", "topic -h") and
// reports whether args named one.
func prefixHelp(args []string, w io.Writer) bool {
	var words []string
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			break
		}
		if strings.HasPrefix(a, "-") {
			return false
		}
		words = append(words, a)
	}
	if len(words) == 0 {
		return false
	}
	prefix := strings.Join(words, " ") + " "
	var under []command
	for _, c := range commands {
		if strings.HasPrefix(c.path+" ", prefix) {
			under = append(under, c)
		}
	}
	if len(under) == 0 {
		return false
	}
	fmt.Fprintf(w, "usage: vltava %s SUBCOMMAND [flags]\n\nsubcommands:\n", strings.Join(words, " "))
	for _, c := range under {
		fmt.Fprintf(w, "  %-40s %s\n", strings.TrimSpace(c.path+" "+c.args), c.summary)
	}
	return true
}

// lookup finds the command whose path is the longest prefix of args.
func lookup(args []string) (*command, []string) {
	var best *command
	bestLen := 0
	for i := range commands {
		words := strings.Fields(commands[i].path)
		if len(words) > len(args) || len(words) <= bestLen {
			continue
		}
		match := true
		for j, w := range words {
			if args[j] != w {
				match = false
				break
			}
		}
		if match {
			best, bestLen = &commands[i], len(words)
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[bestLen:]
}

func defaultBootstrap() string {
	if v := os.Getenv("VLTAVA_BOOTSTRAP"); v != "" {
		return v
	}
	return "127.0.0.1:9092"
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: vltava [-b HOST:PORT] [--timeout D] [-X KEY=VALUE]... COMMAND [flags]")
	fmt.Fprintln(w, "\n-b/--bootstrap defaults to $VLTAVA_BOOTSTRAP or 127.0.0.1:9092; --timeout (default 60s)")
	fmt.Fprintln(w, "bounds every wait for a broker. -X sets TLS and SASL as kcat's -X does (security.protocol,")
	fmt.Fprintln(w, "ssl.ca.location, ssl.certificate.location, ssl.key.location, sasl.mechanism, sasl.username,")
	fmt.Fprintln(w, "sasl.password). --version prints the version.\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-40s %s\n", strings.TrimSpace(c.path+" "+c.args), c.summary)
	}
	fmt.Fprintln(w, "\nRun 'vltava COMMAND -h' for a command's flags.")
}
