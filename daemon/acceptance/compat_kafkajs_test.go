package acceptance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The kafkajs column: testdata/kafkajs is a node project (kafkajs pinned
// by its package-lock.json) with driver.js, which does one produce,
// transaction or consume per run. Its node_modules are installed with
// `npm ci` once per lock file into the user cache directory (or a
// node_modules the testdata directory already has is used).

const kafkajsDir = "testdata/kafkajs"

// kafkajs is the installed driver.
type kafkajs struct {
	node    string
	modules string // NODE_PATH
	driver  string
}

// installKafkajs finds node, installs the locked packages if needed, and
// returns the driver, or why it cannot run here.
func installKafkajs(tmp string) (*kafkajs, string) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, "node not installed (Debian packages nodejs and npm)"
	}
	driver, err := filepath.Abs(filepath.Join(kafkajsDir, "driver.js"))
	if err != nil {
		return nil, err.Error()
	}
	k := &kafkajs{node: node, driver: driver}
	if _, err := os.Stat(filepath.Join(kafkajsDir, "node_modules", "kafkajs")); err == nil {
		k.modules, _ = filepath.Abs(filepath.Join(kafkajsDir, "node_modules"))
		return k, ""
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return nil, "npm not installed (Debian package npm)"
	}
	lock, err := os.ReadFile(filepath.Join(kafkajsDir, "package-lock.json"))
	if err != nil {
		return nil, err.Error()
	}
	sum := sha256.Sum256(lock)
	base, err := os.UserCacheDir()
	if err != nil {
		base = tmp
	}
	dir := filepath.Join(base, "vltava", "kafkajs-"+hex.EncodeToString(sum[:8]))
	k.modules = filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(k.modules, "kafkajs", "package.json")); err == nil {
		return k, ""
	}
	// Install next to the final place, then rename, so an interrupted
	// install is never mistaken for a complete one.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err.Error()
	}
	work, err := os.MkdirTemp(filepath.Dir(dir), "kafkajs-install-")
	if err != nil {
		return nil, err.Error()
	}
	defer os.RemoveAll(work)
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(kafkajsDir, f))
		if err != nil {
			return nil, err.Error()
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			return nil, err.Error()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("npm ci of %s failed (the npm registry unreachable?): %v: %s", kafkajsDir, err, tail(string(out), 5))
	}
	if err := os.Rename(work, dir); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(filepath.Join(k.modules, "kafkajs")); serr != nil { // not a concurrent install
			return nil, err.Error()
		}
	}
	return k, ""
}

// version is "kafkajs X on node vY", for the matrix's header.
func (k *kafkajs) version() string {
	b, err := os.ReadFile(filepath.Join(k.modules, "kafkajs", "package.json"))
	var pkg struct{ Version string }
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil {
		return "kafkajs (version unknown)"
	}
	node, _ := exec.Command(k.node, "--version").Output()
	return fmt.Sprintf("kafkajs %s on node %s", pkg.Version, strings.TrimSpace(string(node)))
}

// kafkajsSpec is driver.js's argument.
type kafkajsSpec struct {
	Op         string         `json:"op"`
	Brokers    []string       `json:"brokers"`
	Topic      string         `json:"topic"`
	Values     []string       `json:"values,omitempty"`
	Count      int            `json:"count,omitempty"`
	Codec      string         `json:"codec,omitempty"`
	Idempotent bool           `json:"idempotent,omitempty"`
	Group      string         `json:"group,omitempty"`
	SASL       map[string]any `json:"sasl,omitempty"`
	SSL        map[string]any `json:"ssl,omitempty"`
	TimeoutMs  int64          `json:"timeoutMs"`
}

// run runs the driver once and returns what it printed.
func (k *kafkajs) run(ctx context.Context, spec kafkajsSpec) (string, error) {
	spec.TimeoutMs = 20000
	if dl, ok := ctx.Deadline(); ok {
		spec.TimeoutMs = min(spec.TimeoutMs, time.Until(dl).Milliseconds()-500)
	}
	arg, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, k.node, k.driver, string(arg))
	cmd.Env = append(os.Environ(), "NODE_PATH="+k.modules, "KAFKAJS_NO_PARTITIONER_WARNING=1")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkajs %s: %v: %s", spec.Op, err, headLines(strings.TrimSpace(stderr.String()), 8))
	}
	return out.String(), nil
}

func kafkajsValues() []string { return compatProduceValues() }

func (k *kafkajs) features() map[string]func(ctx context.Context, addr, topic string) error {
	produce := func(codec string, idempotent bool) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			if _, err := k.run(ctx, kafkajsSpec{Op: "produce", Brokers: []string{addr}, Topic: topic, Codec: codec,
				Idempotent: idempotent, Values: kafkajsValues()}); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, false)
		}
	}
	read := func(op string) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			// Uncompressed: kafkajs cannot read snappy without a codec package.
			if err := seed(ctx, addr, topic, kgo.ProducerBatchCompression(kgo.NoCompression())); err != nil {
				return err
			}
			group := "compat-" + topic
			out, err := k.run(ctx, kafkajsSpec{Op: op, Brokers: []string{addr}, Topic: topic, Group: group, Count: compatRecords})
			if err != nil {
				return err
			}
			var got []string
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				return fmt.Errorf("the driver printed %q: %v", out, err)
			}
			if err := sameValues(got); err != nil {
				return err
			}
			if op != "group" {
				return nil
			}
			// The group's committed offset is past every record.
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				return err
			}
			defer cl.Close()
			offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			if o, ok := offs.Lookup(topic, 0); !ok || o.At != compatRecords {
				return fmt.Errorf("group %s committed %+v, want offset %d", group, o, compatRecords)
			}
			return nil
		}
	}
	return map[string]func(ctx context.Context, addr, topic string) error{
		"produce none": produce("none", false),
		"produce gzip": produce("gzip", false),
		"consume":      read("consume"),
		"idempotent":   produce("none", true),
		"transactions": func(ctx context.Context, addr, topic string) error {
			if _, err := k.run(ctx, kafkajsSpec{Op: "txn", Brokers: []string{addr}, Topic: topic, Values: kafkajsValues()}); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, true)
		},
		"group classic": read("group"),
	}
}

// secure produces through a secured listener with kafkajs (PLAIN and
// SCRAM built in; no GSSAPI).
func (k *kafkajs) secure(ctx context.Context, s secCell, topic string) error {
	spec := kafkajsSpec{Op: "produce", Brokers: []string{s.addr}, Topic: topic, Values: kafkajsValues()}
	if s.mechanism != "" {
		spec.SASL = map[string]any{"mechanism": strings.ToLower(s.mechanism), "username": s.user, "password": s.pass}
	}
	if s.tls() {
		spec.SSL = map[string]any{"ca": s.ca}
		if s.cert.CertFile != "" {
			spec.SSL["cert"], spec.SSL["key"] = s.cert.CertFile, s.cert.KeyFile
		}
	}
	_, err := k.run(ctx, spec)
	return err
}

// headLines is the first n lines of s.
func headLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
