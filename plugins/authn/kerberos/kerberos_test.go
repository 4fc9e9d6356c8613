package kerberos

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	fkerberos "github.com/twmb/franz-go/pkg/sasl/kerberos"

	"github.com/vltava/vltava/plugins/authn/kerberos/kdctest"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

// realm is a KDC with the broker's service principal kafka/localhost,
// users alice and bob, and another service's principal.
type realm struct {
	kdc        *kdctest.KDC
	staleKT    string // kafka/localhost's first keytab, whose key was then replaced
	serviceKT  string
	aliceKT    string
	shortyKT   string // a user whose tickets live 5 seconds
	krb5Config *krbconfig.Config
}

func newRealm(t *testing.T) *realm {
	t.Helper()
	k := kdctest.Start(t)
	r := &realm{kdc: k}
	r.staleKT = k.AddPrincipal(t, "kafka/localhost")
	r.serviceKT = k.Keytab(t, "kafka/localhost")
	r.aliceKT = k.AddPrincipal(t, "alice")
	k.AddPrincipal(t, "other/localhost")
	k.Kadmin(t, `addprinc -randkey -maxlife "5 seconds" shorty`)
	r.shortyKT = k.Keytab(t, "shorty")
	cfg, err := krbconfig.Load(k.Krb5Conf)
	if err != nil {
		t.Fatal(err)
	}
	r.krb5Config = cfg
	return r
}

func (r *realm) client(t *testing.T, user, kt string) *client.Client {
	t.Helper()
	k, err := keytab.Load(kt)
	if err != nil {
		t.Fatal(err)
	}
	cl := client.NewWithKeytab(user, kdctest.Realm, k, r.krb5Config, client.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		t.Fatalf("kinit %s: %v", user, err)
	}
	t.Cleanup(cl.Destroy)
	return cl
}

func configured(t *testing.T, raw map[string]any) *Authenticator {
	t.Helper()
	a := New()
	if err := a.Configure(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	return a
}

// franzClient plays franz-go's GSSAPI mechanism for plugintest.
func franzClient(cl *client.Client, service string) func() func([]byte) []byte {
	return func() func([]byte) []byte {
		mech := fkerberos.Auth{Client: cl, Service: service, PersistAfterAuth: true}.AsMechanism()
		var sess interface {
			Challenge([]byte) (bool, []byte, error)
		}
		return func(server []byte) []byte {
			if sess == nil {
				s, first, err := mech.Authenticate(context.Background(), "localhost:9092")
				if err != nil {
					return []byte("client-error: " + err.Error())
				}
				sess = s
				return first
			}
			_, out, err := sess.Challenge(server)
			if err != nil {
				return []byte("client-error")
			}
			return out
		}
	}
}

func TestKerberosAgainstRealKDC(t *testing.T) {
	r := newRealm(t)
	a := configured(t, map[string]any{"keytab": r.serviceKT})
	alice := r.client(t, "alice", r.aliceKT)
	t.Run("contract", func(t *testing.T) {
		plugintest.Authenticator(t, a, []plugintest.AuthCase{
			{Name: "alice", NewClient: franzClient(alice, "kafka"), Steps: 2, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}},
			{Name: "wrong-service-name", NewClient: franzClient(alice, "other"), Steps: 2, Reject: true},
			{Name: "garbage", Tokens: [][]byte{[]byte("not a token")}, Reject: true},
		})
	})
	refused := func(t *testing.T, a *Authenticator, tok []byte, want string) {
		t.Helper()
		st, err := a.Start(context.Background(), &sdk.StartRequest{Mechanism: Mechanism})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Step(context.Background(), &sdk.StepRequest{Session: st.Session, Token: tok})
		var ae *sdk.AuthenticationError
		if !errors.As(err, &ae) || !strings.Contains(ae.Message, want) {
			t.Fatalf("refusal %v, want a message containing %q", err, want)
		}
		t.Logf("refused: %s", ae.Message)
	}
	t.Run("wrong-service-name-message", func(t *testing.T) {
		refused(t, a, franzClient(alice, "other")()(nil), `service name is "kafka"`)
	})
	t.Run("wrong-keytab", func(t *testing.T) {
		stale := configured(t, map[string]any{"keytab": r.staleKT})
		refused(t, stale, franzClient(alice, "kafka")()(nil), "wrong keytab or key version")
	})
	t.Run("expired-ticket", func(t *testing.T) {
		strict := configured(t, map[string]any{"keytab": r.serviceKT, "max.clock.skew": "1s"})
		shorty := r.client(t, "shorty", r.shortyKT)
		tkt, key, err := shorty.GetServiceTicket("kafka/localhost")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(7 * time.Second)
		auth, _ := types.NewAuthenticator(shorty.Credentials.Domain(), shorty.Credentials.CName())
		auth.Cksum = types.Checksum{CksumType: 0x8003, Checksum: make([]byte, 24)}
		apReq, err := messages.NewAPReq(tkt, key, auth)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := apReq.Marshal()
		inner := append(append(append([]byte{}, krb5OID...), 1, 0), b...)
		refused(t, strict, append(append([]byte{0x60}, derLengthBytes(len(inner))...), inner...), "expired")
	})
	accepted := func(t *testing.T, a *Authenticator, tok []byte) {
		t.Helper()
		st, err := a.Start(context.Background(), &sdk.StartRequest{Mechanism: Mechanism})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Step(context.Background(), &sdk.StepRequest{Session: st.Session, Token: tok}); err != nil {
			t.Fatalf("first token refused: %v", err)
		}
	}
	t.Run("replayed-token", func(t *testing.T) {
		fresh := configured(t, map[string]any{"keytab": r.serviceKT})
		tok := franzClient(alice, "kafka")()(nil)
		accepted(t, fresh, tok)
		refused(t, fresh, tok, "replayed authenticator")
	})
	// gokrb5's client can make two authenticators in one microsecond;
	// they differ in ciphertext and both are honest logins (replay.go).
	t.Run("same-microsecond", func(t *testing.T) {
		fresh := configured(t, map[string]any{"keytab": r.serviceKT})
		tkt, key, err := alice.GetServiceTicket("kafka/localhost")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Second)
		for range 2 {
			auth, _ := types.NewAuthenticator(alice.Credentials.Domain(), alice.Credentials.CName())
			auth.CTime, auth.Cusec = now, 4242
			auth.Cksum = types.Checksum{CksumType: 0x8003, Checksum: make([]byte, 24)}
			apReq, err := messages.NewAPReq(tkt, key, auth)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := apReq.Marshal()
			inner := append(append(append([]byte{}, krb5OID...), 1, 0), b...)
			accepted(t, fresh, append(append([]byte{0x60}, derLengthBytes(len(inner))...), inner...))
		}
	})
	t.Run("principal-mapping", func(t *testing.T) {
		mapped := configured(t, map[string]any{"keytab": r.serviceKT,
			"sasl.kerberos.principal.to.local.rules": []any{`RULE:[1:$1@$0](alice@VLTAVA\.TEST)s/alice@.*/ALICE-ADMIN/L`, "DEFAULT"}})
		plugintest.Authenticator(t, mapped, []plugintest.AuthCase{
			{Name: "alice", NewClient: franzClient(alice, "kafka"), Steps: 2, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice-admin"}},
			{Name: "garbage", Tokens: [][]byte{{0x60, 0}}, Reject: true},
		})
	})
}

func TestConfigErrors(t *testing.T) {
	for name, raw := range map[string]map[string]any{
		"no keytab":      {},
		"missing keytab": {"keytab": "/nonexistent/kafka.keytab"},
		"unknown key":    {"keytab": "x", "realm": "R"},
	} {
		if err := New().Configure(context.Background(), raw); !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("%s: %v, want sdk.ErrInvalidArgument", name, err)
		}
	}
}
