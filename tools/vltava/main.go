// Command vltava is a small Kafka command-line client for people: create and
// inspect topics, produce and consume records, and measure throughput. It
// speaks the Kafka protocol through franz-go, so it works against Vltava and
// any other Kafka-compatible broker.
//
//	vltava [-b HOST:PORT] topic create NAME [-p N] [-r N] [-c key=value ...]
//	vltava produce TOPIC < lines
//	vltava consume TOPIC --from start -n 10
//	vltava perf produce TOPIC --records 100000 --record-size 1024
//	vltava group describe GROUP
//	vltava group reset-offsets GROUP --topic TOPIC --to-earliest [--execute]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one leaf of the command tree, found by its space-separated path.
type command struct {
	path    string // "topic create"
	args    string // positional arguments, for usage
	summary string
	run     func(ctx context.Context, e *env, c *command, args []string) error
}

// commands is the whole command table; each group's file defines its rows.
var commands = concat(topicCommands, produceCommands, consumeCommands, perfCommands, groupCommands, conformanceCommands, clusterCommands)

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
	bootstrap      string // from VLTAVA_BOOTSTRAP or the default; -b overrides per command
	bootstrapSet   bool   // -b/--bootstrap given before the command
}

// errUsage marks an error whose message already explains the usage.
var errUsage = errors.New("usage error")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "vltava:", err)
		}
		os.Exit(1)
	}
}

// run executes one command line. Global flags (-b/--bootstrap) may appear
// before the command path or among the command's own flags.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, bootstrap: defaultBootstrap()}
	// Leading global flags.
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch name {
		case "b", "bootstrap":
			if !hasVal {
				if len(args) < 2 {
					return fmt.Errorf("flag %s needs a value", args[0])
				}
				val, args = args[1], args[1:]
			}
			e.bootstrap, e.bootstrapSet = val, true
			args = args[1:]
		case "h", "help":
			printUsage(stdout)
			return nil
		default:
			printUsage(stderr)
			return fmt.Errorf("unknown global flag %s", args[0])
		}
	}
	if len(args) == 0 || args[0] == "help" {
		printUsage(stdout)
		return nil
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		printUsage(stderr)
		return fmt.Errorf("unknown command %q", strings.Join(args, " "))
	}
	return cmd.run(ctx, e, cmd, rest)
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
	fmt.Fprintln(w, "usage: vltava [-b HOST:PORT] COMMAND [flags]")
	fmt.Fprintln(w, "\n-b/--bootstrap defaults to $VLTAVA_BOOTSTRAP or 127.0.0.1:9092.\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-36s %s\n", c.path+" "+c.args, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'vltava COMMAND -h' for a command's flags.")
}
