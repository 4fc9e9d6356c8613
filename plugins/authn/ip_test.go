package authn_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// TestIPAuthenticator runs vltavad with the ip authenticator on its
// PLAINTEXT listener and connects from 127.0.0.1 (allowed) and 127.0.0.2
// (denied).
func TestIPAuthenticator(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "vltava.yaml")
	if err := os.WriteFile(conf, []byte(`sasl.authenticators: ip
sasl.authenticator.config:
  ip:
    rules:
      - {allow: 127.0.0.1/32, principal: local}
      - {deny: 127.0.0.2/32}
    default: deny
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := daemontest.Start(t, daemontest.Build(t), "--config", conf)
	from := func(ip string) *kgo.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.Dialer(d.DialContext), kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	if _, err := kadm.NewClient(from("127.0.0.1")).ListTopics(ctxT(t, 20*time.Second)); err != nil {
		t.Fatalf("from 127.0.0.1: %v", err)
	}
	if _, err := kadm.NewClient(from("127.0.0.2")).ListTopics(ctxT(t, 20*time.Second)); err == nil {
		t.Fatal("a client from 127.0.0.2 was served")
	}
	// Closed on accept: nothing is read, nothing is answered.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c, err := d.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, _ := c.Read(make([]byte, 1)); n != 0 {
		t.Fatal("the refused connection got bytes")
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.Log(), "rule 2: deny 127.0.0.2/32"); {
		if time.Now().After(deadline) {
			t.Fatalf("the refusal is not logged with its rule:\n%s", p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A crashed plugin refuses while it is down and never admits a
	// denied address; once restarted it admits 127.0.0.1 again.
	if err := syscall.Kill(pluginPid(t, p.Pid(), "ip"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := kadm.NewClient(from("127.0.0.2")).ListTopics(ctxT(t, 5*time.Second)); err == nil {
			t.Fatal("a client from 127.0.0.2 was served while the plugin restarted")
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := kadm.NewClient(from("127.0.0.1")).ListTopics(ctxT(t, 5*time.Second)); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("127.0.0.1 not admitted after the plugin restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
