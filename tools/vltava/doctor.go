package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/sys/unix"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/daemon/fdlimit"
)

var doctorCommands = []command{
	{path: "doctor", summary: "check a cluster's health and this host's limits: brokers reachable, controller, under-replicated/offline/under-min-ISR partitions, descriptors, disk, clock skew", run: doctor},
}

// finding is one line of the doctor's report.
type finding struct {
	check, status, detail string // status: ok, warn, fail, skip
}

func doctor(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	dataDir := f.String("data-dir", "", "a local broker's data `DIR`: check its descriptor need against `ulimit -n` and its disk")
	metrics := f.String("metrics", "", "brokers' metrics listeners, `HOST:PORT,...`: check their clocks against this host's")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var out []finding
	add := func(check, status, format string, a ...any) {
		out = append(out, finding{check, status, fmt.Sprintf(format, a...)})
	}
	err := e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		doctorCluster(ctx, adm, add)
		return nil
	})
	if err != nil {
		add("cluster", "fail", "%v", err)
	}
	if *dataDir != "" {
		doctorHost(*dataDir, add)
	} else {
		add("descriptors", "skip", "pass --data-dir on a broker's host")
		add("disk", "skip", "pass --data-dir on a broker's host")
	}
	if *metrics != "" {
		doctorClocks(ctx, config.SplitList(*metrics), add)
	} else {
		add("clock skew", "skip", "pass --metrics with the brokers' metrics.listen addresses")
	}

	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	failed := 0
	for _, fd := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", fd.check, strings.ToUpper(fd.status), fd.detail)
		if fd.status == "fail" {
			failed++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d check(s) failed", failed)
	}
	return nil
}

func doctorCluster(ctx context.Context, adm *kadm.Client, add func(check, status, format string, a ...any)) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		add("cluster", "fail", "metadata: %v", err)
		return
	}
	add("cluster", "ok", "cluster %s, %d brokers", md.Cluster, len(md.Brokers))
	var down []string
	for _, b := range md.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			down = append(down, fmt.Sprintf("%d (%s): %v", b.NodeID, addr, err))
			continue
		}
		conn.Close()
	}
	if len(down) > 0 {
		add("brokers reachable", "fail", "%s", strings.Join(down, "; "))
	} else {
		add("brokers reachable", "ok", "all %d advertised addresses accept connections", len(md.Brokers))
	}
	if md.Controller < 0 {
		add("controller", "fail", "no active controller")
	} else {
		add("controller", "ok", "broker %d", md.Controller)
	}

	minISR := map[string]int{}
	if rcs, err := adm.DescribeTopicConfigs(ctx, md.Topics.Names()...); err == nil {
		for _, rc := range rcs {
			for _, cfg := range rc.Configs {
				if cfg.Key == "min.insync.replicas" && cfg.Value != nil {
					minISR[rc.Name], _ = strconv.Atoi(*cfg.Value)
				}
			}
		}
	}
	var under, offline, belowMin, total int
	var examples []string
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			total++
			switch {
			case p.Leader < 0:
				offline++
				examples = append(examples, fmt.Sprintf("%s-%d offline", t.Topic, p.Partition))
			case len(p.ISR) < len(p.Replicas):
				under++
				if len(p.ISR) < minISR[t.Topic] {
					belowMin++
				}
				examples = append(examples, fmt.Sprintf("%s-%d ISR %v of %v", t.Topic, p.Partition, p.ISR, p.Replicas))
			}
		}
	}
	if len(examples) > 5 {
		examples = append(examples[:5], "...")
	}
	switch {
	case offline > 0 || belowMin > 0:
		add("partitions", "fail", "%d of %d offline, %d under min.insync.replicas, %d under-replicated: %s", offline, total, belowMin, under, strings.Join(examples, ", "))
	case under > 0:
		add("partitions", "warn", "%d of %d under-replicated: %s", under, total, strings.Join(examples, ", "))
	default:
		add("partitions", "ok", "%d partitions, every one led and fully in sync", total)
	}
}

func doctorHost(dir string, add func(check, status, format string, a ...any)) {
	cfg := config.DefaultBroker()
	cfg.LogDirs = dir
	need, how := fdlimit.Need(cfg)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		add("descriptors", "skip", "getrlimit: %v", err)
	} else {
		// vltavad raises its soft limit to the hard one at start.
		switch have := lim.Max; {
		case have != unix.RLIM_INFINITY && have < uint64(need):
			add("descriptors", "fail", "need about %d (%s), hard limit %d: raise it (`ulimit -n %d`, LimitNOFILE=%d)", need, how, have, 2*need, 2*need)
		case have != unix.RLIM_INFINITY && have < uint64(2*need):
			add("descriptors", "warn", "need about %d (%s), hard limit %d leaves little room to grow", need, how, have)
		default:
			add("descriptors", "ok", "need about %d, hard limit %d", need, lim.Max)
		}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		add("disk", "fail", "%s: %v", dir, err)
		return
	}
	total := float64(fs.Blocks) * float64(fs.Bsize)
	free := float64(fs.Bavail) * float64(fs.Bsize)
	used := 1 - free/total
	status := "ok"
	switch {
	case used > 0.9:
		status = "fail"
	case used > 0.8:
		status = "warn"
	}
	add("disk", status, "%s: %.0f%% used, %.1f GiB free", dir, used*100, free/(1<<30))
}

func doctorClocks(ctx context.Context, addrs []string, add func(check, status, format string, a ...any)) {
	cl := &http.Client{Timeout: 5 * time.Second}
	worst := time.Duration(0)
	var notes []string
	for _, a := range addrs {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/healthz", nil)
		before := time.Now()
		resp, err := cl.Do(req)
		if err != nil {
			add("clock skew", "fail", "%s: %v", a, err)
			continue
		}
		after := time.Now()
		resp.Body.Close()
		at, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			notes = append(notes, a+": no Date header")
			continue
		}
		// Date has one-second resolution: compare with the middle of the
		// request and allow for the truncation.
		mid := before.Add(after.Sub(before) / 2)
		skew := at.Add(500 * time.Millisecond).Sub(mid)
		if skew < 0 {
			skew = -skew
		}
		worst = max(worst, skew)
		notes = append(notes, fmt.Sprintf("%s ±%s", a, skew.Round(time.Second)))
	}
	status := "ok"
	if worst > 30*time.Second {
		status = "fail"
	} else if worst > 2*time.Second {
		status = "warn"
	}
	add("clock skew", status, "%s (timestamps, retention and transaction timeouts assume clocks within seconds)", strings.Join(notes, ", "))
}
