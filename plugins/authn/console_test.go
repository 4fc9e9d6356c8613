package authn_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vltava/vltava/daemon/daemontest"
)

// TestConsoleLoginOnSASLBroker: on a broker whose listener requires SASL,
// the web console asks for credentials, refuses a wrong password (the
// broker's authenticator decides) and serves the pages to a user the
// broker accepts.
func TestConsoleLoginOnSASLBroker(t *testing.T) {
	bin := daemontest.Build(t)
	dir := t.TempDir()
	seedUsers(t, bin, dir)
	maddr := daemontest.FreePort(t)
	startSASL(t, bin, dir, "simple", "metrics.listen: "+maddr+"\n")
	get := func(user, pass string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+maddr+"/ui/topics", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
	}
	// The broker serves once it has joined; the login works from then on.
	var code int
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code, _, body = get("alice", alicePass); code == http.StatusOK {
			break
		}
	}
	if code != http.StatusOK || !strings.Contains(body, "<h1>Topics</h1>") {
		t.Fatalf("alice with her password: %d\n%s", code, body)
	}
	if code, auth, _ := get("", ""); code != http.StatusUnauthorized || !strings.Contains(auth, "Basic") {
		t.Errorf("no credentials: %d %q, want 401 with a Basic challenge", code, auth)
	}
	if code, _, _ := get("alice", "wrong"+alicePass); code != http.StatusUnauthorized {
		t.Errorf("a wrong password: %d, want 401", code)
	}
	if code, _, _ := get("mallory", "anything"); code != http.StatusUnauthorized {
		t.Errorf("an unknown user: %d, want 401", code)
	}
	if code, _, _ := get("bob", bobPass); code != http.StatusOK {
		t.Errorf("bob with his password: %d, want 200", code)
	}
}
