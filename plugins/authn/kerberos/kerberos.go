// Package kerberos is the "kerberos" authenticator: SASL GSSAPI (RFC 4752)
// with the Kerberos V5 mechanism (RFC 4121) as an acceptor holding a
// service keytab, built on github.com/jcmturner/gokrb5/v8.
//
// # The exchange
//
//	client                                   broker (acceptor)
//	InitialContextToken (AP-REQ)      ──▶    verify the ticket with the keytab,
//	                                         the authenticator, clock skew, replay
//	                                  ◀──    AP-REP token, if the client asked for
//	                                         mutual authentication (librdkafka,
//	                                         Cyrus SASL); else the wrap token below
//	(empty token, after an AP-REP)    ──▶
//	                                  ◀──    Wrap{0x01 "no security layer", 0,0,0}
//	Wrap{0x01, size, [authzid]}       ──▶    check: layer 1, authzid empty or the
//	                                         client's own name
//	                                  ◀──    (empty: authenticated)
//
// Wrap tokens are RFC 4121 checksummed tokens without confidentiality,
// keyed with the initiator's subkey when its authenticator carries one
// (MIT clients) and the ticket's session key otherwise (franz-go); the
// broker's are acceptor tokens (key usage 22), the client's initiator
// tokens (24). Only "no security layer" is offered: Kafka does not wrap
// its traffic, TLS does that.
//
// # Config
//
//	sasl.authenticator.config:
//	  kerberos:
//	    keytab: /etc/vltava/kafka.keytab
//	    principal: kafka/broker1.example.com@EXAMPLE.COM   # default: any of the keytab's with the service name
//	    sasl.kerberos.service.name: kafka                    # default kafka
//	    sasl.kerberos.principal.to.local.rules: [DEFAULT]     # see Rules
//	    max.clock.skew: 5m
//
// A ticket for another service name, one the keytab cannot decrypt (wrong
// keytab, or a key version the keytab lacks), an expired ticket and a
// replayed authenticator are each refused with a message saying which;
// the principal becomes User:<short name> per the mapping rules.
package kerberos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/asnAppTag"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/service"
	"github.com/jcmturner/gokrb5/v8/types"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Mechanism is the SASL mechanism name.
const Mechanism = "GSSAPI"

// Config is the plugin's configuration.
type Config struct {
	Keytab       string        `mapstructure:"keytab"`
	Principal    string        `mapstructure:"principal"`
	ServiceName  string        `mapstructure:"sasl.kerberos.service.name"`
	Rules        []string      `mapstructure:"sasl.kerberos.principal.to.local.rules"`
	MaxClockSkew time.Duration `mapstructure:"max.clock.skew"`
}

// acceptor is a configured keytab and rules.
type acceptor struct {
	kt          *keytab.Keytab
	principal   types.PrincipalName // the service principal
	fixed       bool                // principal configured: only its keys decrypt
	realm       string
	serviceName string
	rules       *Rules
	skew        time.Duration
}

// Authenticator is the kerberos authenticator; create it with New.
type Authenticator struct {
	*serve.Sessions
	acc     atomic.Pointer[acceptor]
	replays replays // outlives reconfiguration
}

// New returns an authenticator that refuses every client until
// Configure gives it a keytab.
func New() *Authenticator {
	a := &Authenticator{}
	a.Sessions = serve.Mechanisms(serve.Mechanism{Name: Mechanism, Start: func(context.Context, *sdk.StartRequest) (serve.Conversation, error) {
		acc := a.acc.Load()
		if acc == nil {
			return nil, fmt.Errorf("kerberos: no keytab configured: %w", sdk.ErrUnavailable)
		}
		return &conversation{acc: acc, replays: &a.replays}, nil
	}})
	return a
}

// Configure loads the keytab (serve.Configurer).
func (a *Authenticator) Configure(ctx context.Context, raw map[string]any) error {
	var cfg Config
	if err := serve.DecodeConfig(raw, &cfg); err != nil {
		return err
	}
	acc, err := newAcceptor(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", err, sdk.ErrInvalidArgument)
	}
	a.acc.Store(acc)
	return nil
}

func newAcceptor(cfg Config) (*acceptor, error) {
	if cfg.Keytab == "" {
		return nil, errors.New("config: key \"keytab\": the service keytab is required")
	}
	kt, err := keytab.Load(cfg.Keytab)
	if err != nil {
		return nil, fmt.Errorf("config: key \"keytab\": %v", err)
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "kafka"
	}
	if cfg.MaxClockSkew <= 0 {
		cfg.MaxClockSkew = 5 * time.Minute
	}
	acc := &acceptor{kt: kt, serviceName: cfg.ServiceName, skew: cfg.MaxClockSkew}
	if cfg.Principal != "" {
		name, realm, _ := strings.Cut(cfg.Principal, "@")
		acc.principal, acc.realm, acc.fixed = types.NewPrincipalName(1, name), realm, true
	} else {
		for _, e := range kt.Entries {
			if len(e.Principal.Components) > 0 && e.Principal.Components[0] == cfg.ServiceName {
				acc.principal = types.PrincipalName{NameType: 1, NameString: e.Principal.Components}
				acc.realm = e.Principal.Realm
				break
			}
		}
		if acc.realm == "" {
			return nil, fmt.Errorf("config: key \"keytab\": %s holds no principal for service %q (sasl.kerberos.service.name)", cfg.Keytab, cfg.ServiceName)
		}
	}
	if acc.principal.NameString[0] != cfg.ServiceName {
		return nil, fmt.Errorf("config: principal %s is not for service %q (sasl.kerberos.service.name)", cfg.Principal, cfg.ServiceName)
	}
	if acc.rules, err = ParseRules(acc.realm, cfg.Rules); err != nil {
		return nil, fmt.Errorf("config: key \"sasl.kerberos.principal.to.local.rules\": %v", err)
	}
	return acc, nil
}

func refuse(format string, args ...any) error {
	return &sdk.AuthenticationError{Message: fmt.Sprintf(format, args...)}
}

// conversation is one client's GSSAPI exchange.
type conversation struct {
	acc     *acceptor
	replays *replays
	step    int
	key     types.EncryptionKey // for wrap tokens
	short   string              // the mapped name
	client  string              // the client principal, for messages
	offer   []byte              // the security-layer offer sent
}

const (
	stepInit = iota
	stepAfterAPRep
	stepLayer
	stepDone
)

// gssMutual is GSS_C_MUTUAL_FLAG in the authenticator checksum.
const gssMutual = 2

// krb5OID is the Kerberos V5 GSS mechanism, DER-encoded.
var krb5OID = []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02}

func (c *conversation) Step(ctx context.Context, tok []byte) ([]byte, bool, sdk.Principal, error) {
	switch c.step {
	case stepInit:
		return c.init(tok)
	case stepAfterAPRep:
		if len(tok) != 0 {
			return nil, false, sdk.Principal{}, refuse("GSSAPI: unexpected token after the AP-REP")
		}
		c.step = stepLayer
		out, err := c.layerOffer()
		return out, false, sdk.Principal{}, err
	case stepLayer:
		return c.layer(tok)
	}
	return nil, false, sdk.Principal{}, errors.New("kerberos: conversation already finished")
}

func (c *conversation) init(tok []byte) ([]byte, bool, sdk.Principal, error) {
	apReqBytes, err := unwrapInitial(tok)
	if err != nil {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: %v", err)
	}
	var apReq messages.APReq
	if err := apReq.Unmarshal(apReqBytes); err != nil {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: malformed AP-REQ: %v", err)
	}
	sname := strings.Join(apReq.Ticket.SName.NameString, "/")
	if len(apReq.Ticket.SName.NameString) == 0 || apReq.Ticket.SName.NameString[0] != c.acc.serviceName {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: the ticket is for service %s@%s, but this broker's service name is %q (sasl.kerberos.service.name)", sname, apReq.Ticket.Realm, c.acc.serviceName)
	}
	opts := []func(*service.Settings){service.MaxClockSkew(c.acc.skew), service.DecodePAC(false)}
	if c.acc.fixed {
		opts = append(opts, service.KeytabPrincipal(strings.Join(c.acc.principal.NameString, "/")))
	}
	settings := service.NewSettings(c.acc.kt, opts...)
	// apReq.Verify decrypts and checks the ticket and the authenticator
	// (times, skew, addresses); the replay check is ours (replay.go), not
	// service.VerifyAPREQ's.
	ok, err := apReq.Verify(c.acc.kt, c.acc.skew, settings.ClientAddress(), settings.KeytabPrincipal())
	if err != nil || !ok {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: %s", describeVerifyError(err, sname, apReq.Ticket.Realm))
	}
	if !c.replays.first(apReq.EncryptedAuthenticator.Cipher, time.Now(), 2*c.acc.skew) {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: replayed authenticator")
	}
	creds := credentials.NewFromPrincipalName(apReq.Authenticator.CName, apReq.Authenticator.CRealm)
	auth := apReq.Authenticator
	c.client = creds.CName().PrincipalNameString() + "@" + creds.Domain()
	short, err := c.acc.rules.ShortName(creds.CName().NameString, creds.Domain())
	if err != nil {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: %s: %v", c.client, err)
	}
	c.short = short
	c.key = apReq.Ticket.DecryptedEncPart.Key
	if auth.SubKey.KeyType != 0 && len(auth.SubKey.KeyValue) > 0 {
		c.key = auth.SubKey
	}
	mutual := auth.Cksum.CksumType == 0x8003 && len(auth.Cksum.Checksum) >= 24 &&
		binary.LittleEndian.Uint32(auth.Cksum.Checksum[20:24])&gssMutual != 0
	if mutual {
		rep, err := apRep(auth, apReq.Ticket.DecryptedEncPart.Key)
		if err != nil {
			return nil, false, sdk.Principal{}, fmt.Errorf("kerberos: building the AP-REP: %w", err)
		}
		c.step = stepAfterAPRep
		return rep, false, sdk.Principal{}, nil
	}
	c.step = stepLayer
	out, err := c.layerOffer()
	return out, false, sdk.Principal{}, err
}

// describeVerifyError says why gokrb5 refused an AP-REQ, in words an
// operator can act on.
func describeVerifyError(err error, sname, realm string) string {
	msg := fmt.Sprint(err)
	switch {
	case strings.Contains(msg, "TKT_EXPIRED") || strings.Contains(msg, "ticket expired") || strings.Contains(msg, "expired"):
		return "the service ticket has expired; get a new one (kinit)"
	case strings.Contains(msg, "NOTYET") || strings.Contains(msg, "SKEW"):
		return "the ticket is not valid yet or the clocks differ too much (max.clock.skew): " + msg
	case strings.Contains(msg, "REPEAT") || strings.Contains(msg, "replay"):
		return "replayed authenticator"
	case strings.Contains(msg, "keytab") || strings.Contains(msg, "decrypt") || strings.Contains(msg, "BADKEYVER") || strings.Contains(msg, "NOKEY") || strings.Contains(msg, "integrity"):
		return fmt.Sprintf("the broker's keytab cannot decrypt the ticket for %s@%s (wrong keytab or key version): %s", sname, realm, msg)
	}
	return "ticket refused: " + msg
}

// unwrapInitial strips RFC 2743's InitialContextToken framing:
// 0x60 len OID TOK_ID(01 00) AP-REQ.
func unwrapInitial(tok []byte) ([]byte, error) {
	if len(tok) < 2 || tok[0] != 0x60 {
		return nil, errors.New("not a GSS-API initial context token")
	}
	n, rest, err := derLength(tok[1:])
	if err != nil || n != len(rest) {
		return nil, errors.New("bad GSS-API token length")
	}
	if !bytes.HasPrefix(rest, krb5OID) {
		return nil, errors.New("not the Kerberos V5 mechanism")
	}
	rest = rest[len(krb5OID):]
	if len(rest) < 2 || rest[0] != 0x01 || rest[1] != 0x00 {
		return nil, errors.New("not an AP-REQ token")
	}
	return rest[2:], nil
}

func derLength(b []byte) (int, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errors.New("short")
	}
	if b[0] < 0x80 {
		return int(b[0]), b[1:], nil
	}
	k := int(b[0] & 0x7f)
	if k == 0 || k > 4 || len(b) < 1+k {
		return 0, nil, errors.New("bad length")
	}
	n := 0
	for _, x := range b[1 : 1+k] {
		n = n<<8 | int(x)
	}
	return n, b[1+k:], nil
}

func derLengthBytes(n int) []byte {
	if n < 0x80 {
		return []byte{byte(n)}
	}
	var out []byte
	for n > 0 {
		out = append([]byte{byte(n)}, out...)
		n >>= 8
	}
	return append([]byte{0x80 | byte(len(out))}, out...)
}

// apRep builds the GSS token carrying KRB_AP_REP (mutual
// authentication): ctime and cusec of the client's authenticator,
// encrypted with the ticket's session key (key usage 12).
func apRep(auth types.Authenticator, sessionKey types.EncryptionKey) ([]byte, error) {
	seq, _ := rand.Int(rand.Reader, big.NewInt(1<<31))
	part := messages.EncAPRepPart{CTime: auth.CTime, Cusec: auth.Cusec, SequenceNumber: seq.Int64()}
	b, err := asn1.Marshal(part)
	if err != nil {
		return nil, err
	}
	b = asn1tools.AddASNAppTag(b, asnAppTag.EncAPRepPart)
	ed, err := crypto.GetEncryptedData(b, sessionKey, keyusage.AP_REP_ENCPART, 0)
	if err != nil {
		return nil, err
	}
	rep := messages.APRep{PVNO: 5, MsgType: msgtype.KRB_AP_REP, EncPart: ed}
	rb, err := asn1.Marshal(rep)
	if err != nil {
		return nil, err
	}
	rb = asn1tools.AddASNAppTag(rb, asnAppTag.APREP)
	inner := append(append(append([]byte{}, krb5OID...), 0x02, 0x00), rb...)
	return append(append([]byte{0x60}, derLengthBytes(len(inner))...), inner...), nil
}

// layerOffer is RFC 4752's first server message: security layers
// offered (1: none) and the maximum message size (0: none), wrapped.
func (c *conversation) layerOffer() ([]byte, error) {
	c.offer = []byte{0x01, 0, 0, 0}
	et, err := crypto.GetEtype(c.key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("kerberos: session key type %d: %w", c.key.KeyType, err)
	}
	wt := gssapi.WrapToken{Flags: 0x01, EC: uint16(et.GetHMACBitLength() / 8), Payload: c.offer}
	if err := wt.SetCheckSum(c.key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
		return nil, fmt.Errorf("kerberos: wrap: %w", err)
	}
	return wt.Marshal()
}

// layer checks the client's choice and ends the exchange.
func (c *conversation) layer(tok []byte) ([]byte, bool, sdk.Principal, error) {
	c.step = stepDone
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(tok, false); err != nil {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: security layer message: %v", err)
	}
	if wt.Flags&0x02 != 0 {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: a sealed security layer message is not supported")
	}
	if ok, err := wt.Verify(c.key, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: security layer message fails its checksum: %v", err)
	}
	p := wt.Payload
	if len(p) < 4 || p[0] != 0x01 {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: the client must choose \"no security layer\"")
	}
	if authz := string(p[4:]); authz != "" && authz != c.client && authz != c.short {
		return nil, false, sdk.Principal{}, refuse("GSSAPI: authorization id %q differs from the authenticated %s", authz, c.client)
	}
	return nil, true, sdk.Principal{Type: sdk.PrincipalTypeUser, Name: c.short}, nil
}
