// Command fakebroker runs franz-go's in-memory fake Kafka cluster (kfake)
// as a standalone single-broker process. It exists only for benchmark
// comparisons (tools/bench/compare.sh): it gives the client-bound ceiling
// (--blackhole: produce requests are acknowledged and their records
// dropped), the client-bound consume ceiling (--synthetic SIZE: every fetch
// is answered from one canned batch of SIZE-byte records, so the broker
// does no work per fetch) and a reference broker that keeps its data
// (--data-dir). It is not part of Vltava and is never used to serve real
// data.
//
//	fakebroker [--listen HOST:PORT] [--blackhole] [--synthetic SIZE]
//	           [--data-dir DIR] [--partitions N] [--topic NAME]
//
// Once listening it prints one line to stdout,
//
//	fakebroker ready: listening on HOST:PORT
//
// and serves until SIGINT or SIGTERM, then closes the cluster and exits 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil))
}

// options are the parsed command-line flags.
type options struct {
	listen     string
	blackhole  bool
	synthetic  int
	dataDir    string
	partitions int
	topic      string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fakebroker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "listen on `HOST:PORT` (port 0: any free port)")
	fs.BoolVar(&o.blackhole, "blackhole", false, "acknowledge produce requests and drop the records (client-bound ceiling)")
	fs.IntVar(&o.synthetic, "synthetic", 0, "answer every fetch with one canned ~1 MiB batch of `SIZE`-byte records (client-bound consume ceiling; 0: off)")
	fs.StringVar(&o.dataDir, "data-dir", "", "persist the cluster's data in `DIR` (default: memory only)")
	fs.IntVar(&o.partitions, "partitions", 6, "partitions of auto-created topics and of --topic")
	fs.StringVar(&o.topic, "topic", "", "create this topic at start with --partitions partitions")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.partitions < 1 {
		return o, fmt.Errorf("--partitions %d: must be at least 1", o.partitions)
	}
	if o.synthetic < 0 {
		return o, fmt.Errorf("--synthetic %d: must not be negative", o.synthetic)
	}
	if o.blackhole && o.dataDir != "" {
		return o, errors.New("--blackhole and --data-dir exclude each other")
	}
	return o, nil
}

// clusterOpts converts the options into kfake options: one broker bound to
// exactly o.listen (kfake itself always binds 127.0.0.1, so ListenFn
// replaces the address it asks for).
func (o options) clusterOpts() []kfake.Opt {
	listen := o.listen
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, listen) }),
		kfake.DefaultNumPartitions(o.partitions),
		kfake.AllowAutoTopicCreation(),
	}
	if o.topic != "" {
		opts = append(opts, kfake.SeedTopics(int32(o.partitions), o.topic))
	}
	if o.blackhole {
		opts = append(opts, kfake.BlackholeProduce())
	}
	if o.synthetic > 0 {
		opts = append(opts, kfake.SyntheticFetch(kfake.SyntheticBatch{RecordBytes: o.synthetic}))
	}
	if o.dataDir != "" {
		opts = append(opts, kfake.DataDir(o.dataDir))
	}
	return opts
}

// run serves until a signal arrives on stop (nil: SIGINT/SIGTERM) and
// returns the exit code.
func run(args []string, stdout, stderr io.Writer, stop <-chan os.Signal) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "fakebroker:", err)
		return 2
	}
	if stop == nil {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(ch)
		stop = ch
	}
	c, err := kfake.NewCluster(o.clusterOpts()...)
	if err != nil {
		fmt.Fprintln(stderr, "fakebroker:", err)
		return 1
	}
	fmt.Fprintf(stdout, "fakebroker ready: listening on %s\n", c.ListenAddrs()[0])
	<-stop
	c.Close()
	return 0
}
