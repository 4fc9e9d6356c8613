package acceptance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/daemon/daemontest"
)

// pluginProcs maps "kind name" to the pid of each live plugin process
// whose parent is ppid (Linux /proc).
func pluginProcs(t *testing.T, ppid int) map[string]int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := procStat(pid)
		if !ok || st.ppid != ppid || st.state == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) == 4 && args[1] == "plugin" {
			out[args[2]+" "+args[3]] = pid
		}
	}
	return out
}

type stat struct {
	state byte
	ppid  int
}

// procStat reads a process's state and parent; ok is false if it is gone.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0][0], ppid: ppid}, true
}

func alive(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.state != 'Z'
}

func needProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
}

// waitRestarted waits until the plugin "key" runs under a pid other than old.
func waitRestarted(t *testing.T, d *daemontest.Proc, key string, old int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pid, ok := pluginProcs(t, d.Pid())[key]; ok && pid != old {
			return pid
		}
		if !d.Running() {
			t.Fatalf("vltavad exited while %s was down; log:\n%s", key, d.Log())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come back within 30s; log:\n%s", key, d.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPluginKill9WhileClientsActive kills each plugin process with SIGKILL
// while a producer and a KIP-848 consumer group (assigned by the range
// plugin) are working. The broker stays up, every plugin comes back, the
// producer sees no error at all (produce never calls a plugin), the group
// consumes every record, and metadata requests made while the store is
// down fail only with the documented retriable REQUEST_TIMED_OUT.
func TestPluginKill9WhileClientsActive(t *testing.T) {
	needProc(t)
	d := startDaemon(t, map[string]string{
		"group.consumer.assignors":             "range",
		"group.consumer.heartbeat.interval.ms": "250",
		"group.initial.rebalance.delay.ms":     "0",
	})
	procs := pluginProcs(t, d.Pid())
	if len(procs) != 2 || procs["metastore local"] == 0 || procs["assignor range"] == 0 {
		t.Fatalf("plugin processes = %v, want metastore local and assignor range", procs)
	}
	const topic, total = "orders", 3000
	createTopic(t, newAdmin(t, d.Addr()), topic, 3, nil)

	ctx := testCtx(t, 90*time.Second)
	var produced atomic.Int64
	var produceErrs []error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := newClient(t, d.Addr(), kgo.DefaultProduceTopic(topic))
		for i := 0; i < total && ctx.Err() == nil; i += 10 {
			recs := make([]*kgo.Record, 10)
			for j := range recs {
				recs[j] = kgo.StringRecord(strconv.Itoa(i + j))
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				produceErrs = append(produceErrs, err)
				continue
			}
			produced.Add(10)
			time.Sleep(2 * time.Millisecond)
		}
	}()

	var seenMu sync.Mutex
	seen := map[string]bool{}
	// consumed ends every member's poll once the group has seen it all.
	consumed, allSeen := context.WithCancel(ctx)
	defer allSeen()
	consume := func(member string) {
		defer wg.Done()
		cl := newClient(t, d.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("plugin-kill"),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(member))
		for consumed.Err() == nil {
			fs := cl.PollFetches(consumed)
			seenMu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			if len(seen) >= total {
				allSeen()
			}
			seenMu.Unlock()
		}
	}
	wg.Add(1)
	go consume("m1")

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first records", func() bool { return produced.Load() >= 300 })

	// The metadata store: kill it and ask for metadata changes at once.
	adminCl := newClient(t, d.Addr())
	syscall.Kill(procs["metastore local"], syscall.SIGKILL)
	var codes []int16
	for i := 0; ; i++ {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("during-outage-%d", i), 1, 1
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 5000
		resp, err := req.RequestWith(ctx, adminCl)
		if err != nil {
			t.Fatalf("CreateTopics while the store was down: %v", err)
		}
		code := resp.Topics[0].ErrorCode
		if code == 0 {
			break
		}
		codes = append(codes, code)
		time.Sleep(5 * time.Millisecond)
	}
	for _, c := range codes {
		if c != kerr.RequestTimedOut.Code {
			t.Errorf("CreateTopics during the outage: %v, want only REQUEST_TIMED_OUT", kerr.ErrorForCode(c))
		}
	}
	t.Logf("store outage: %d CreateTopics answered REQUEST_TIMED_OUT before one succeeded", len(codes))
	waitRestarted(t, d, "metastore local", procs["metastore local"])

	// The assignor: kill it and have a second member join, which needs a
	// new assignment round.
	syscall.Kill(procs["assignor range"], syscall.SIGKILL)
	wg.Add(1)
	go consume("m2")
	waitRestarted(t, d, "assignor range", procs["assignor range"])

	wg.Wait()
	if len(produceErrs) > 0 {
		t.Errorf("producer saw %d errors while plugins were killed, first: %v", len(produceErrs), produceErrs[0])
	}
	seenMu.Lock()
	n := len(seen)
	seenMu.Unlock()
	if produced.Load() != total || n != total {
		t.Errorf("produced %d, group consumed %d distinct records; want %d each", produced.Load(), n, total)
	}
	if ctx.Err() != nil {
		t.Fatalf("clients did not finish within the test's deadline")
	}
	if !d.Running() {
		t.Fatalf("vltavad died")
	}
	// The supervisor logs a restart once the new process answered, which
	// may come a moment after its pid shows.
	for _, want := range []string{`msg="host: plugin process exited; restarting" plugin=local`, `msg="host: plugin restarted" plugin=range`} {
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(d.Log(), want) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(d.Log(), want) {
			t.Errorf("log lacks %s", want)
		}
	}
	if err := d.Stop(); err != nil {
		t.Errorf("clean stop after the kills: %v", err)
	}
}

// TestNoOrphanPluginsAfterBrokerKill9 kills only the vltavad process with
// SIGKILL: its plugin processes notice their parent is gone and exit.
func TestNoOrphanPluginsAfterBrokerKill9(t *testing.T) {
	needProc(t)
	d := startDaemon(t, nil)
	procs := pluginProcs(t, d.Pid())
	if len(procs) != 3 { // metastore local, assignors uniform and range
		t.Fatalf("plugin processes = %v, want 3", procs)
	}
	d.Kill9Leader()
	deadline := time.Now().Add(30 * time.Second)
	for key, pid := range procs {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("plugin %s (pid %d) still running 30s after vltavad was killed", key, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestStopStopsPlugins: a clean shutdown leaves no plugin process.
func TestStopStopsPlugins(t *testing.T) {
	needProc(t)
	d := startDaemon(t, nil)
	procs := pluginProcs(t, d.Pid())
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	for key, pid := range procs {
		if alive(pid) {
			t.Errorf("plugin %s (pid %d) outlived a clean shutdown", key, pid)
		}
	}
}

// TestBadPluginConfigFailsStartup: a bad key in a plugin's config stops
// the broker at startup with the plugin's name and the key.
func TestBadPluginConfigFailsStartup(t *testing.T) {
	bin := daemontest.Build(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vltavad.yaml")
	yaml := "metadata.store: local\nmetadata.store.config:\n  watch.buffer: 64\n  wach.history: 10\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", cfg, "--data-dir", dir, "--listen", daemontest.FreePort(t))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("vltavad with a bad plugin config: %v, want exit 1; output:\n%s", err, out)
	}
	for _, want := range []string{`plugin \"local\" (metastore)`, `unknown key(s) \"wach.history\"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// TestPluginsSubcommand lists what a config would load.
func TestPluginsSubcommand(t *testing.T) {
	bin := daemontest.Build(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vltavad.properties")
	if err := os.WriteFile(cfg, []byte("group.consumer.assignors=roundrobin\nmetadata.store.config.watch.buffer=64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "plugins", "--config", cfg, "--data-dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("vltavad plugins: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	// The version is the main module's: "(devel)", or a pseudo-version
	// where the build stamps version control information.
	row := func(line, kind, name string) bool {
		f := strings.Fields(line) // KIND NAME VERSION PATH: bin plugin kind name
		return len(f) == 7 && f[0] == kind && f[1] == name &&
			(f[2] == "(devel)" || strings.HasPrefix(f[2], "v")) &&
			strings.Join(f[3:], " ") == bin+" plugin "+kind+" "+name
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "KIND") ||
		!row(lines[1], "metastore", "local") || !row(lines[2], "assignor", "roundrobin") {
		t.Errorf("vltavad plugins printed:\n%s", out)
	}
}
