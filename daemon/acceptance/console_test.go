package acceptance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// browser starts headless Chromium (Debian's chromium) for chromedp and
// collects every error the pages write to the console (uncaught
// exceptions, console.error, failed loads).
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
	shots  string // VLTAVA_SCREENSHOTS: where page screenshots go
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs headless Chromium: apt-get install chromium (Debian package chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	b := &browser{ctx: ctx, shots: os.Getenv("VLTAVA_SCREENSHOTS")}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s: %s (%s)", m.Type, m.Text, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancelC(); cancelA(); <-done })
	return b
}

// visit loads url, checks the page rendered without an error, and saves
// a screenshot as name.png when VLTAVA_SCREENSHOTS is set.
func (b *browser) visit(t *testing.T, url, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
		t.Fatalf("loading %s: %v", url, err)
	}
	errText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("error")||{}).textContent||""`))
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	if errText != "" {
		t.Errorf("%s shows an error: %s", url, errText)
	}
	if b.shots != "" {
		if buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil && os.MkdirAll(b.shots, 0o755) == nil {
			os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Errorf("%s: the browser reported errors: %v", url, b.errors)
		b.errors = nil
	}
}

// text returns the text of the first element matching sel.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel)))
	if err != nil {
		t.Fatalf("reading %q: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// count returns how many elements match sel.
func (b *browser) count(t *testing.T, sel string) int {
	t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("counting %q: %v", sel, err)
	}
	return n
}

// TestConsoleInBrowser drives the web console in headless Chromium
// against three real brokers: every page loads without errors, the
// figures shown are those the Kafka API reports, a topic created through
// the API appears, and a killed broker shows as down with its partitions
// under-replicated.
func TestConsoleInBrowser(t *testing.T) {
	br := newBrowser(t)
	c := startClusterWith(t, daemontest.ClusterOptions{Brokers: 3, Metrics: true}, nil)
	ui := "http://" + c.Broker(1).MetricsAddr() + "/ui"
	adm := clusterAdmin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	createReplicated(t, c, "console-demo", 3, 3, nil)
	cl := clusterClient(t, c, kgo.DefaultProduceTopic("console-demo"))
	for i := range 30 {
		v := []byte(fmt.Sprintf(`{"n":%d,"kind":"json"}`, i))
		if i%3 == 1 {
			v = []byte{0xff, 0x00, byte(i)}
		}
		r := &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: v, Partition: int32(i % 3),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("console-test")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: "console-demo", Partition: 0, At: 4, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "console-group", commit); err != nil {
		t.Fatal(err)
	}

	// Cluster page: what Metadata says.
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	br.visit(t, ui+"/", "cluster")
	if got := br.text(t, "#brokers-up"); got != "3 / 3" {
		t.Errorf("brokers up = %q, want 3 / 3", got)
	}
	if got := br.text(t, "#controller"); got != strconv.Itoa(int(md.Controller)) {
		t.Errorf("controller = %q, Metadata says %d", got, md.Controller)
	}
	if got := br.text(t, "#topic-count"); got != strconv.Itoa(len(md.Topics)) {
		t.Errorf("topics = %q, Metadata lists %d", got, len(md.Topics))
	}

	// Topics and one topic: partitions, offsets as ListOffsets answers.
	br.visit(t, ui+"/topics", "topics")
	if got := br.text(t, `tr[data-topic="console-demo"] td.partitions`); got != "3" {
		t.Errorf("console-demo partitions = %q", got)
	}
	ends, err := adm.ListEndOffsets(ctx, "console-demo")
	if err != nil {
		t.Fatal(err)
	}
	br.visit(t, ui+"/topics/console-demo", "topic")
	for p := int32(0); p < 3; p++ {
		o, _ := ends.Lookup("console-demo", p)
		if got := br.text(t, fmt.Sprintf(`tr[data-partition="%d"] td.end`, p)); got != strconv.FormatInt(o.Offset, 10) {
			t.Errorf("partition %d log end = %q, ListOffsets says %d", p, got, o.Offset)
		}
	}

	// Records: a page of partition 1, JSON pretty-printed, binary as hex.
	br.visit(t, ui+"/topics/console-demo/records?partition=1&n=5", "records")
	if n := br.count(t, "#records tr[data-offset]"); n != 5 {
		t.Errorf("records page shows %d records, want 5", n)
	}
	if br.count(t, "#records pre.json") == 0 || br.count(t, "#records pre.binary") == 0 {
		t.Error("records page shows no pretty JSON or no hex binary value")
	}

	// Groups: lag as kadm computes it.
	lags, err := adm.Lag(ctx, "console-group")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := lags["console-group"].Lag.Lookup("console-demo", 0)
	br.visit(t, ui+"/groups", "groups")
	br.visit(t, ui+"/groups/console-group", "group")
	if got := br.text(t, `tr[data-tp="console-demo-0"] td.lag`); got != strconv.FormatInt(want.Lag, 10) {
		t.Errorf("console-group lag on partition 0 = %q, kadm says %d", got, want.Lag)
	}
	br.visit(t, ui+"/plugins", "plugins")
	if br.count(t, "#plugins tr") < 2 {
		t.Error("plugins page lists no plugin (the metadata store runs as one)")
	}
	br.visit(t, ui+"/clients?if-removed=Produce:3", "clients")
	if !strings.Contains(br.text(t, "#clients"), "kgo") {
		t.Error("clients page does not list franz-go (kgo)")
	}

	// A topic created through the API appears.
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "console-late"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "console-late on the topics page", func() error {
		br.visit(t, ui+"/topics", "topics-late")
		if br.count(t, `tr[data-topic="console-late"]`) == 0 {
			return fmt.Errorf("not listed")
		}
		return nil
	})

	// A killed broker shows as down, its partitions under-replicated.
	c.Broker(3).Kill9()
	waitUntil(t, 60*time.Second, "broker 3 down on the cluster page", func() error {
		br.visit(t, ui+"/", "cluster-broker-down")
		if br.count(t, `tr.bad[data-broker="3"]`) == 0 {
			return fmt.Errorf("broker 3 not shown down")
		}
		if n, _ := strconv.Atoi(br.text(t, "#under-replicated")); n == 0 {
			return fmt.Errorf("no partition under-replicated yet")
		}
		return nil
	})
	br.visit(t, ui+"/topics/console-demo", "topic-under-replicated")
	if br.count(t, "#partitions tr.warn") == 0 {
		t.Error("console-demo's partitions are not marked under-replicated after broker 3 died")
	}
}
