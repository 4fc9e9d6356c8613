// Command vltavad runs a Vltava broker.
//
//	vltavad [--config FILE] [--override KEY=VALUE ...] [--listen HOST:PORT]
//	        [--advertised HOST:PORT] [--data-dir DIR] [--node-id N] [--log-level LEVEL]
//	vltavad --version
//	vltavad SUBCOMMAND [args]
//
// The config file may be a stock Kafka server.properties: Kafka's keys
// with a meaning here are translated (kafkakeys.go), the others are
// ignored with one warning. The data directory is locked (lock.go) before
// anything is written to it, and the Kafka port is checked first, so a
// broker that cannot start leaves a new directory as it found it.
//
// With no subcommand it serves until SIGINT or SIGTERM, then shuts down
// cleanly; a second signal exits at once. A first argument that does not
// start with "-" names a subcommand.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/daemon/buildinfo"
)

// subcommand is one entry of the subcommand table.
type subcommand struct {
	summary string
	// run executes the subcommand and returns the exit code.
	run func(args []string, stdout, stderr io.Writer) int
}

// subcommands is filled by the init functions of the files that define
// them ("plugin" and "plugins" arrive with the plugin host).
var subcommands = map[string]subcommand{}

func init() {
	subcommands["config"] = subcommand{
		summary: "print the effective broker config (same flags as serving) as .properties and exit",
		run:     printConfig,
	}
}

func main() {
	if !namesSubcommand(os.Args[1:]) {
		reexecForSysmon() // serving: see sysmon.go
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// namesSubcommand reports whether args name a subcommand (a first argument
// not starting with "-") rather than serving.
func namesSubcommand(args []string) bool {
	return len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-'
}

// run dispatches to a subcommand or serves, and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if namesSubcommand(args) {
		name := args[0]
		if name == "help" {
			usage(stdout, nil)
			return 0
		}
		sc, ok := subcommands[name]
		if !ok {
			fmt.Fprintf(stderr, "vltavad: unknown subcommand %q\n", name)
			usage(stderr, nil)
			return 2
		}
		return sc.run(args[1:], stdout, stderr)
	}
	return serveMain(args, stdout, stderr)
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: vltavad [flags]            serve a broker")
	fmt.Fprintln(w, "       vltavad SUBCOMMAND [args]")
	fmt.Fprintln(w, "\nsubcommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintln(w, "\nflags:")
	if fs == nil {
		fs = newServeFlags(w).fs
	}
	printFlagDefaults(w, fs)
}

// loadFlags parses the serve flags, printing usage on error; ok is false
// when the caller should exit with code.
func loadFlags(args []string, stdout, stderr io.Writer) (f *serveFlags, code int, ok bool) {
	f = newServeFlags(stderr)
	f.fs.Usage = func() {}
	f.fs.SetOutput(io.Discard) // errors are printed below, once
	if err := f.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, f.fs)
			return nil, 0, false
		}
		fmt.Fprintln(stderr, "vltavad:", err)
		usage(stderr, f.fs)
		return nil, 2, false
	}
	if f.version {
		fmt.Fprintln(stdout, buildinfo.Line("vltavad"))
		return nil, 0, false
	}
	return f, 0, true
}

// printConfig prints every broker config key with its effective value.
func printConfig(args []string, stdout, stderr io.Writer) int {
	f, code, ok := loadFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	cfg, err := f.load()
	if err != nil {
		fmt.Fprintln(stderr, "vltavad:", err)
		return 1
	}
	if len(f.ignored) > 0 {
		fmt.Fprintf(stderr, "vltavad: ignored (Kafka's, no effect in Vltava): %s\n", strings.Join(f.ignored, ", "))
	}
	for _, n := range f.notes {
		fmt.Fprintln(stderr, "vltavad:", n)
	}
	for _, v := range config.BrokerValues(cfg) {
		fmt.Fprintf(stdout, "%s=%s\n", v.Name, v.Value)
	}
	return 0
}

// printFlagDefaults is flag.PrintDefaults with the "--name" spelling the
// README uses.
func printFlagDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(fl *flag.Flag) {
		name, usage := flag.UnquoteUsage(fl)
		line := "  --" + fl.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + usage
		if _, isBool := fl.Value.(interface{ IsBoolFlag() bool }); !isBool && fl.DefValue != "" && fl.DefValue != "0" {
			line += fmt.Sprintf(" (default %s)", fl.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}
