// Package etcdtest starts real etcd servers (Debian package etcd-server)
// for tests: one member or a cluster of several, on loopback ports chosen
// at run time, data in the test's temp dir, killed (process group,
// SIGKILL) when the test ends. Tests skip when the etcd binary is
// missing.
package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vltava/vltava/plugins/metastore/internal/servertest"
)

// Binary finds the etcd server: $VLTAVA_ETCD, else etcd on PATH.
func Binary() (string, error) {
	if p := os.Getenv("VLTAVA_ETCD"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	return exec.LookPath("etcd")
}

// SkipIfMissing skips the test when no etcd binary is installed.
func SkipIfMissing(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Skip("etcd not installed (Debian package etcd-server): ", err)
	}
	return bin
}

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	bin     string
	Members []*Member
}

// Member is one etcd server.
type Member struct {
	Name       string
	ClientURL  string // http://127.0.0.1:port
	peerURL    string
	dir        string
	args       []string
	proc       *servertest.Proc
	clientPort int
}

// TLS serves the client port over TLS with this certificate and key.
type TLS struct {
	CertFile, KeyFile string
}

// Start starts an n-member cluster and waits until every member answers
// its health check.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartTLS(t, n, nil)
}

// StartTLS is Start with TLS on the client port when tls is not nil.
func StartTLS(t testing.TB, n int, tls *TLS) *Cluster {
	t.Helper()
	bin := SkipIfMissing(t)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a program outside the tests may take a reserved port meanwhile
		c, err := start(t, bin, n, tls)
		if err == nil {
			return c
		}
		lastErr = err
	}
	t.Fatalf("etcdtest: %v", lastErr)
	return nil
}

func start(t testing.TB, bin string, n int, tls *TLS) (*Cluster, error) {
	ports := servertest.FreePorts(t, 2*n)
	c := &Cluster{t: t, bin: bin}
	scheme := "http"
	if tls != nil {
		scheme = "https"
	}
	var initial []string
	for i := range n {
		m := &Member{
			Name:       fmt.Sprintf("m%d", i+1),
			ClientURL:  fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			peerURL:    fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			dir:        t.TempDir(),
			clientPort: ports[2*i],
		}
		initial = append(initial, m.Name+"="+m.peerURL)
		c.Members = append(c.Members, m)
	}
	token := fmt.Sprintf("vltava-test-%d", time.Now().UnixNano())
	for _, m := range c.Members {
		m.args = []string{
			"--name", m.Name,
			"--data-dir", filepath.Join(m.dir, "data"),
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", token,
			"--heartbeat-interval", "100", "--election-timeout", "1000",
			"--logger", "zap", "--log-level", "warn",
		}
		if tls != nil {
			m.args = append(m.args, "--cert-file", tls.CertFile, "--key-file", tls.KeyFile)
		}
		m.proc = servertest.Start(t, m.dir, bin, m.args...)
	}
	for _, m := range c.Members {
		if err := m.proc.WaitFor(30*time.Second, m.health); err != nil {
			for _, m := range c.Members {
				m.proc.Kill()
			}
			return nil, err
		}
	}
	return c, nil
}

func (m *Member) health() error {
	// The harness only asks whether the member is up; the tests check
	// certificates through the store.
	cl := http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := cl.Get(m.ClientURL + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s", resp.Status)
	}
	return nil
}

// Endpoints is the client address list, "127.0.0.1:p1,127.0.0.1:p2".
func (c *Cluster) Endpoints() string {
	var eps []string
	for _, m := range c.Members {
		_, hostPort, _ := strings.Cut(m.ClientURL, "://")
		eps = append(eps, hostPort)
	}
	return strings.Join(eps, ",")
}

// Kill kill -9s member i.
func (c *Cluster) Kill(i int) { c.Members[i].proc.Kill() }

// Restart starts a killed member i again on its data directory.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.Members[i]
	m.proc.Kill()
	m.args = replaceArg(m.args, "--initial-cluster-state", "existing")
	m.proc = servertest.Start(c.t, m.dir, c.bin, m.args...)
	if err := m.proc.WaitFor(30*time.Second, m.health); err != nil {
		c.t.Fatalf("etcdtest: restart %s: %v", m.Name, err)
	}
}

func replaceArg(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == flag {
			out[i+1] = value
		}
	}
	return out
}

// Leader returns the index of the member that leads, or -1.
func (c *Cluster) Leader() int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, m := range c.Members {
		if m.proc.Exited() {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			continue
		}
		st, err := cli.Status(ctx, m.ClientURL)
		cli.Close()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}
