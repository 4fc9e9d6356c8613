package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/sdk"
)

const reauthMs = 1500

// saslLogin authenticates c as user with SaslHandshake v1 and
// SaslAuthenticate at version v, and returns the response.
func saslLogin(t *testing.T, c *rawConn, v int16, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.Version, h.Mechanism = 1, "PLAIN"
	c.send(h)
	hr := kmsg.NewPtrSASLHandshakeResponse()
	hr.Version = 1
	if err := c.recv(hr); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("handshake: err %v code %d", err, hr.ErrorCode)
	}
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.Version, a.SASLAuthBytes = v, []byte("\x00"+user+"\x00"+pass)
	c.send(a)
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	ar.Version = v
	if err := c.recv(ar); err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return ar
}

func metadataOK(t *testing.T, c *rawConn) {
	t.Helper()
	m := kmsg.NewPtrMetadataRequest()
	m.Version = 9
	c.send(m)
	mr := kmsg.NewPtrMetadataResponse()
	mr.Version = 9
	if err := c.recv(mr); err != nil {
		t.Fatalf("metadata: %v", err)
	}
}

// KIP-368: the session lifetime is answered, an expired session's next
// request closes the connection, re-authentication extends it (as the
// same principal only), and v0 clients, which cannot re-authenticate,
// get no lifetime.
func TestSASLReauthentication(t *testing.T) {
	b := saslBroker(t, []sdk.Authenticator{newPlainAuth(testUsers)}, func(c *config.Broker) { c.ConnectionsMaxReauthMs = reauthMs })
	t.Run("ExpiredSessionCloses", func(t *testing.T) {
		t.Parallel()
		c := dialRaw(t, b)
		if r := saslLogin(t, c, 1, "alice", "alice-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != reauthMs {
			t.Fatalf("code %d lifetime %d, want 0 and %d", r.ErrorCode, r.SessionLifetimeMillis, reauthMs)
		}
		metadataOK(t, c)
		time.Sleep(reauthMs*time.Millisecond + 200*time.Millisecond)
		m := kmsg.NewPtrMetadataRequest()
		m.Version = 9
		c.send(m)
		expectEOF(t, c)
	})
	t.Run("ReauthenticationExtends", func(t *testing.T) {
		t.Parallel()
		c := dialRaw(t, b)
		saslLogin(t, c, 2, "alice", "alice-secret")
		time.Sleep(reauthMs * time.Millisecond * 6 / 10)
		if r := saslLogin(t, c, 2, "alice", "alice-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != reauthMs {
			t.Fatalf("re-authentication: code %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
		}
		time.Sleep(reauthMs * time.Millisecond * 6 / 10) // past the first session's end
		metadataOK(t, c)
	})
	t.Run("ReauthenticationAsAnotherPrincipal", func(t *testing.T) {
		t.Parallel()
		c := dialRaw(t, b)
		saslLogin(t, c, 1, "alice", "alice-secret")
		if r := saslLogin(t, c, 1, "bob", "bob-secret"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("re-authentication as bob: code %d, want SASL_AUTHENTICATION_FAILED", r.ErrorCode)
		}
		expectEOF(t, c)
	})
	t.Run("V0NoLifetime", func(t *testing.T) {
		t.Parallel()
		c := dialRaw(t, b)
		saslLogin(t, c, 0, "alice", "alice-secret")
		time.Sleep(reauthMs*time.Millisecond + 200*time.Millisecond)
		metadataOK(t, c)
	})
}

// franz-go re-authenticates on its own before the lifetime ends and keeps
// producing on its connections.
func TestSASLReauthenticationFranzGo(t *testing.T) {
	auth := newPlainAuth(testUsers)
	b := saslBroker(t, []sdk.Authenticator{auth}, func(c *config.Broker) { c.ConnectionsMaxReauthMs = reauthMs })
	cl := testClient(t, b, plainOpt("alice", "alice-secret"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("reauth"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for end := time.Now().Add(5 * reauthMs * time.Millisecond / 2); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce across re-authentications: %v", err)
		}
	}
	auth.mu.Lock()
	starts := auth.next
	auth.mu.Unlock()
	if starts < 4 { // two connections (metadata, produce), each re-authenticated at least once
		t.Errorf("%d SASL conversations, want re-authentications", starts)
	}
}

// Before authentication a frame over sasl.server.max.receive.size closes
// the connection unread.
func TestSASLMaxReceiveSize(t *testing.T) {
	b := saslBroker(t, []sdk.Authenticator{newPlainAuth(testUsers)}, func(c *config.Broker) { c.SaslServerMaxReceiveSize = 1024 })
	c := dialRaw(t, b)
	// A valid ApiVersions v0 request, 2 KiB long with its client ID,
	// which would be answered on a PLAINTEXT listener.
	clientID := strings.Repeat("c", 2000)
	body := kbin.AppendInt16(nil, 18)
	body = kbin.AppendInt16(body, 0)
	body = kbin.AppendInt32(body, 1)
	body = kbin.AppendString(body, clientID)
	c.conn.Write(append(kbin.AppendInt32(nil, int32(len(body))), body...))
	expectEOF(t, c)
	// After authentication the usual limit applies.
	c = dialRaw(t, b)
	saslLogin(t, c, 1, "alice", "alice-secret")
	m := kmsg.NewPtrMetadataRequest()
	m.Version = 9
	for range 100 {
		m.Topics = append(m.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("a-topic-name-of-some-length")})
	}
	c.send(m)
	mr := kmsg.NewPtrMetadataResponse()
	mr.Version = 9
	if err := c.recv(mr); err != nil {
		t.Fatalf("a %d-topic metadata request after authentication: %v", len(m.Topics), err)
	}
}
