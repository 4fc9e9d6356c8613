package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/sdk"
)

// plainAuth is a test authenticator for SASL PLAIN (RFC 4616): the client
// sends one message, [authzid] NUL authcid NUL passwd, checked against a
// static user list.
type plainAuth struct {
	users map[string]string

	mu       sync.Mutex
	next     int
	sessions map[string]bool
	ended    []string
	endedCh  chan string
}

func newPlainAuth(users map[string]string) *plainAuth {
	return &plainAuth{users: users, sessions: map[string]bool{}, endedCh: make(chan string, 16)}
}

func (a *plainAuth) Mechanisms(ctx context.Context, req *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	return &sdk.MechanismsResponse{Mechanisms: []string{"PLAIN"}}, nil
}

func (a *plainAuth) Start(ctx context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	if req.Mechanism != "PLAIN" {
		return nil, fmt.Errorf("%w: mechanism %q", sdk.ErrInvalidArgument, req.Mechanism)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	id := strconv.Itoa(a.next)
	a.sessions[id] = true
	return &sdk.StartResponse{Session: id}, nil
}

func (a *plainAuth) Step(ctx context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	a.mu.Lock()
	ok := a.sessions[req.Session]
	delete(a.sessions, req.Session) // PLAIN is one step, whatever the outcome
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: unknown session", sdk.ErrInvalidArgument)
	}
	parts := bytes.Split(req.Token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return nil, &sdk.AuthenticationError{Message: "malformed PLAIN message"}
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if want, ok := a.users[user]; !ok || want != pass || (authzid != "" && authzid != user) {
		return nil, &sdk.AuthenticationError{Message: "Invalid username or password"}
	}
	return &sdk.StepResponse{Done: true, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: user}}, nil
}

func (a *plainAuth) End(ctx context.Context, req *sdk.EndRequest) (*sdk.EndResponse, error) {
	a.mu.Lock()
	delete(a.sessions, req.Session)
	a.mu.Unlock()
	a.endedCh <- req.Session
	return &sdk.EndResponse{}, nil
}

// saslBroker starts a broker with a SASL_PLAINTEXT listener served by auths.
func saslBroker(t *testing.T, auths []sdk.Authenticator, edit ...func(*config.Broker)) *Broker {
	t.Helper()
	b, err := newSASLBroker(t, auths, edit...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return b
}

func newSASLBroker(t *testing.T, auths []sdk.Authenticator, edit ...func(*config.Broker)) (*Broker, error) {
	cfg := config.DefaultBroker()
	cfg.Listeners = "SASL_PLAINTEXT://127.0.0.1:0"
	cfg.LogDirs = t.TempDir()
	for _, e := range edit {
		e(&cfg)
	}
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return New(cfg, Options{
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		Authenticators: auths,
	})
}

var testUsers = map[string]string{"alice": "alice-secret", "bob": "bob-secret"}

func plainOpt(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

func TestSASLPlainFranzGo(t *testing.T) {
	auth := newPlainAuth(testUsers)
	b := saslBroker(t, []sdk.Authenticator{auth})
	cl := testClient(t, b, plainOpt("alice", "alice-secret"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("secured"))
	ctx := testCtx(t)
	for i := range 10 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatalf("produce as alice: %v", err)
		}
	}
	recs := consume(t, consumer(t, b, "secured", plainOpt("bob", "bob-secret")), 10)
	for i, r := range recs {
		if want := "v" + strconv.Itoa(i); string(r.Value) != want {
			t.Fatalf("record %d = %q, want %q", i, r.Value, want)
		}
	}
}

func TestSASLPlainWrongPassword(t *testing.T) {
	b := saslBroker(t, []sdk.Authenticator{newPlainAuth(testUsers)})
	for name, opt := range map[string]kgo.Opt{
		"wrong password": plainOpt("alice", "guess"),
		"unknown user":   plainOpt("mallory", "alice-secret"),
	} {
		t.Run(name, func(t *testing.T) {
			cl := testClient(t, b, opt, kgo.RetryTimeout(time.Second))
			err := cl.Ping(testCtx(t))
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("Ping = %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

// TestSASLRawConversation drives the state machine by hand: what a SASL
// listener allows before authentication, and the errors and closes.
func TestSASLRawConversation(t *testing.T) {
	auth := newPlainAuth(testUsers)
	b := saslBroker(t, []sdk.Authenticator{auth})

	handshake := func(v int16, mech string) *kmsg.SASLHandshakeRequest {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = v, mech
		return r
	}
	authenticate := func(v int16, token string) *kmsg.SASLAuthenticateRequest {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.Version, r.SASLAuthBytes = v, []byte(token)
		return r
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 9

	t.Run("MetadataBeforeAuthCloses", func(t *testing.T) {
		c := dialRaw(t, b)
		api := kmsg.NewPtrApiVersionsRequest()
		api.Version = 2 // rawConn.recv expects no header tags; v3+ is flexible yet keeps header v0
		c.send(api)
		var ar kmsg.ApiVersionsResponse
		ar.Version = 2
		if err := c.recv(&ar); err != nil || ar.ErrorCode != 0 {
			t.Fatalf("ApiVersions before auth: err %v, code %d", err, ar.ErrorCode)
		}
		c.send(metadata)
		expectEOF(t, c)
	})
	t.Run("UnsupportedMechanism", func(t *testing.T) {
		c := dialRaw(t, b)
		c.send(handshake(1, "SCRAM-SHA-512"))
		var r kmsg.SASLHandshakeResponse
		r.Version = 1
		if err := c.recv(&r); err != nil {
			t.Fatal(err)
		}
		if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(r.SupportedMechanisms, []string{"PLAIN"}) {
			t.Fatalf("got code %d mechanisms %q, want UNSUPPORTED_SASL_MECHANISM [PLAIN]", r.ErrorCode, r.SupportedMechanisms)
		}
		expectEOF(t, c)
	})
	t.Run("HandshakeV0RawTokens", func(t *testing.T) {
		// KIP-43's v0 exchange: after a v0 handshake the token goes as a
		// bare size-prefixed frame and the answer comes back the same
		// way (PLAIN: empty); then the connection serves requests.
		c := dialRaw(t, b)
		c.send(handshake(0, "PLAIN"))
		var r kmsg.SASLHandshakeResponse
		r.Version = 0
		if err := c.recv(&r); err != nil {
			t.Fatal(err)
		}
		if r.ErrorCode != 0 || !slices.Equal(r.SupportedMechanisms, []string{"PLAIN"}) {
			t.Fatalf("got code %d mechanisms %q, want success [PLAIN]", r.ErrorCode, r.SupportedMechanisms)
		}
		if tok := c.rawToken([]byte("\x00alice\x00alice-secret")); len(tok) != 0 {
			t.Fatalf("PLAIN answered %q, want an empty token", tok)
		}
		c.send(metadata)
		mr := kmsg.NewPtrMetadataResponse()
		mr.Version = metadata.Version
		if err := c.recv(mr); err != nil || len(mr.Brokers) != 1 {
			t.Fatalf("metadata after a raw authentication: err %v, %d brokers", err, len(mr.Brokers))
		}
	})
	t.Run("HandshakeV0RawWrongPassword", func(t *testing.T) {
		// A refused raw token has no error to carry: the connection closes.
		c := dialRaw(t, b)
		c.send(handshake(0, "PLAIN"))
		var r kmsg.SASLHandshakeResponse
		r.Version = 0
		if err := c.recv(&r); err != nil || r.ErrorCode != 0 {
			t.Fatalf("handshake: err %v code %d", err, r.ErrorCode)
		}
		c.sendRaw([]byte("\x00alice\x00nope"))
		expectEOF(t, c)
	})
	t.Run("HandshakeV0RawThenRequestBeforeAuth", func(t *testing.T) {
		// A Kafka request where a raw token is due is a token, and a
		// malformed one: refused, closed.
		c := dialRaw(t, b)
		c.send(handshake(0, "PLAIN"))
		var r kmsg.SASLHandshakeResponse
		r.Version = 0
		if err := c.recv(&r); err != nil || r.ErrorCode != 0 {
			t.Fatalf("handshake: err %v code %d", err, r.ErrorCode)
		}
		c.send(metadata)
		expectEOF(t, c)
	})
	t.Run("AuthenticateBeforeHandshake", func(t *testing.T) {
		c := dialRaw(t, b)
		c.send(authenticate(1, "\x00alice\x00alice-secret"))
		var r kmsg.SASLAuthenticateResponse
		r.Version = 1
		if err := c.recv(&r); err != nil {
			t.Fatal(err)
		}
		if r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("code %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
		}
		expectEOF(t, c)
	})
	t.Run("FailureMessageThenClose", func(t *testing.T) {
		c := dialRaw(t, b)
		c.send(handshake(1, "PLAIN"))
		var hr kmsg.SASLHandshakeResponse
		hr.Version = 1
		if err := c.recv(&hr); err != nil || hr.ErrorCode != 0 {
			t.Fatalf("handshake: err %v code %d", err, hr.ErrorCode)
		}
		c.send(authenticate(2, "\x00alice\x00nope"))
		var r kmsg.SASLAuthenticateResponse
		r.Version = 2
		if err := c.recv(&r); err != nil {
			t.Fatal(err)
		}
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Authentication failed: Invalid username or password" {
			t.Fatalf("code %d message %v, want SASL_AUTHENTICATION_FAILED with the authenticator's message", r.ErrorCode, r.ErrorMessage)
		}
		expectEOF(t, c)
	})
	t.Run("SuccessThenMetadataThenNoReauth", func(t *testing.T) {
		c := dialRaw(t, b)
		c.send(handshake(1, "PLAIN"))
		var hr kmsg.SASLHandshakeResponse
		hr.Version = 1
		if err := c.recv(&hr); err != nil || hr.ErrorCode != 0 {
			t.Fatalf("handshake: err %v code %d", err, hr.ErrorCode)
		}
		c.send(authenticate(1, "alice\x00alice\x00alice-secret"))
		var r kmsg.SASLAuthenticateResponse
		r.Version = 1
		if err := c.recv(&r); err != nil || r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
			t.Fatalf("authenticate: err %v code %d lifetime %d", err, r.ErrorCode, r.SessionLifetimeMillis)
		}
		c.send(metadata)
		mr := kmsg.NewPtrMetadataResponse()
		mr.Version = metadata.Version
		if err := c.recv(mr); err != nil || len(mr.Brokers) != 1 {
			t.Fatalf("metadata after auth: err %v, %d brokers", err, len(mr.Brokers))
		}
		c.send(handshake(1, "PLAIN"))
		if err := c.recv(&hr); err != nil || hr.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("second handshake: err %v code %d, want ILLEGAL_SASL_STATE", err, hr.ErrorCode)
		}
		c.send(metadata) // still open and authenticated
		if err := c.recv(mr); err != nil {
			t.Fatalf("metadata after refused re-handshake: %v", err)
		}
	})
	t.Run("EndOnCloseMidConversation", func(t *testing.T) {
		c := dialRaw(t, b)
		c.send(handshake(1, "PLAIN"))
		var hr kmsg.SASLHandshakeResponse
		hr.Version = 1
		if err := c.recv(&hr); err != nil || hr.ErrorCode != 0 {
			t.Fatalf("handshake: err %v code %d", err, hr.ErrorCode)
		}
		auth.mu.Lock()
		open := len(auth.sessions)
		auth.mu.Unlock()
		if open != 1 {
			t.Fatalf("%d sessions open after the handshake, want 1", open)
		}
		c.conn.Close()
		select {
		case <-auth.endedCh:
		case <-time.After(5 * time.Second):
			t.Fatal("End was not called after the client left mid conversation")
		}
		auth.mu.Lock()
		open = len(auth.sessions)
		auth.mu.Unlock()
		if open != 0 {
			t.Fatalf("%d sessions left after End", open)
		}
	})
}

// sendRaw writes token as a bare size-prefixed frame (SaslHandshake v0).
func (c *rawConn) sendRaw(token []byte) {
	c.t.Helper()
	if _, err := c.conn.Write(append(kbin.AppendInt32(nil, int32(len(token))), token...)); err != nil {
		c.t.Fatal(err)
	}
}

// rawToken sends a raw SASL token and reads the raw answer.
func (c *rawConn) rawToken(token []byte) []byte {
	c.t.Helper()
	c.sendRaw(token)
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		c.t.Fatalf("reading the raw SASL answer: %v", err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.conn, buf); err != nil {
		c.t.Fatalf("reading the raw SASL answer: %v", err)
	}
	return buf
}

// expectEOF asserts the broker closes the connection without a response.
func expectEOF(t *testing.T, c *rawConn) {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, c.conn)
	if err != nil || n != 0 {
		t.Fatalf("want the connection closed with nothing sent; read %d bytes, err %v", n, err)
	}
}

func TestSASLHandshakeOnPlaintextListener(t *testing.T) {
	b := testBroker(t)
	c := dialRaw(t, b)
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = 1, "PLAIN"
	c.send(r)
	var hr kmsg.SASLHandshakeResponse
	hr.Version = 1
	if err := c.recv(&hr); err != nil || hr.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("err %v code %d, want ILLEGAL_SASL_STATE", err, hr.ErrorCode)
	}
}

func TestSASLEnabledMechanisms(t *testing.T) {
	t.Run("NoAuthenticator", func(t *testing.T) {
		b, err := newSASLBroker(t, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err == nil {
			b.Close()
			t.Fatal("a SASL listener without an authenticator started")
		}
	})
	t.Run("EnabledButNotOffered", func(t *testing.T) {
		b, err := newSASLBroker(t, []sdk.Authenticator{newPlainAuth(testUsers)},
			func(c *config.Broker) { c.SaslEnabledMechanisms = "PLAIN,SCRAM-SHA-256" })
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err == nil {
			b.Close()
			t.Fatal("started with an enabled mechanism no authenticator offers")
		}
	})
	t.Run("FilteredOut", func(t *testing.T) {
		// Two authenticators; only the second one's mechanism is enabled.
		b := saslBroker(t, []sdk.Authenticator{newPlainAuth(testUsers), renamed{newPlainAuth(testUsers), "PLAIN-ALT"}},
			func(c *config.Broker) { c.SaslEnabledMechanisms = "PLAIN-ALT" })
		c := dialRaw(t, b)
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = 1, "PLAIN"
		c.send(r)
		var hr kmsg.SASLHandshakeResponse
		hr.Version = 1
		if err := c.recv(&hr); err != nil {
			t.Fatal(err)
		}
		if hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(hr.SupportedMechanisms, []string{"PLAIN-ALT"}) {
			t.Fatalf("code %d mechanisms %q, want UNSUPPORTED_SASL_MECHANISM [PLAIN-ALT]", hr.ErrorCode, hr.SupportedMechanisms)
		}
	})
}

// renamed offers an authenticator's single mechanism under another name.
type renamed struct {
	*plainAuth
	name string
}

func (r renamed) Mechanisms(ctx context.Context, req *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	return &sdk.MechanismsResponse{Mechanisms: []string{r.name}}, nil
}

func (r renamed) Start(ctx context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	if req.Mechanism != r.name {
		return nil, sdk.ErrInvalidArgument
	}
	return r.plainAuth.Start(ctx, &sdk.StartRequest{Mechanism: "PLAIN"})
}

func TestSASLPlainSarama(t *testing.T) {
	b := saslBroker(t, []sdk.Authenticator{newPlainAuth(testUsers)})
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll

	prod, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer prod.Close()
	for i := range 5 {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama-sasl", Value: sarama.StringEncoder("m" + strconv.Itoa(i))}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	cons, err := sarama.NewConsumer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama-sasl", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("consume partition: %v", err)
	}
	defer pc.Close()
	for i := range 5 {
		select {
		case m := <-pc.Messages():
			if want := "m" + strconv.Itoa(i); string(m.Value) != want {
				t.Fatalf("message %d = %q, want %q", i, m.Value, want)
			}
		case err := <-pc.Errors():
			t.Fatalf("consume: %v", err)
		case <-time.After(15 * time.Second):
			t.Fatalf("message %d not received", i)
		}
	}

	bad := sarama.NewConfig()
	*bad = *cfg
	bad.Net.SASL.Password = "wrong"
	bad.Metadata.Retry.Max = 0
	if cl, err := sarama.NewClient([]string{b.Addr()}, bad); err == nil {
		cl.Close()
		t.Fatal("sarama connected with a wrong password")
	} else if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		t.Fatalf("sarama with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
