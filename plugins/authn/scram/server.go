package scram

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/vltava/vltava/plugins/sdk"
)

// LookupFunc finds a user's credential for a mechanism; an error matching
// sdk.ErrNotFound means no such user (or none for this mechanism).
type LookupFunc func(ctx context.Context, user, mech string) (Credential, error)

// fakeSecret keys the salts of unknown users (see the package doc).
var fakeSecret = func() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}()

// serverNonce is the server's part of the nonce: 32 random bytes in
// base64 (tests replace it to replay RFC 7677's example).
var serverNonce = func() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// Server is the server side of one SCRAM exchange: client-first →
// server-first, client-final → server-final.
type Server struct {
	mech   string
	h      func() hash.Hash
	lookup LookupFunc

	step        int
	user        string
	cred        Credential
	known       bool
	gs2Header   string
	clientNonce string
	nonce       string // client nonce + server nonce
	clientFirst string // client-first-message-bare
	serverFirst string
}

// NewServer starts an exchange for mech.
func NewServer(mech string, lookup LookupFunc) (*Server, error) {
	h, err := hashFor(mech)
	if err != nil {
		return nil, err
	}
	return &Server{mech: mech, h: h, lookup: lookup}, nil
}

// User is the authenticated user once Step reported done.
func (s *Server) User() string { return s.user }

// failed is the rejection every bad credential gets: it does not say
// whether the user exists.
var failed = &sdk.AuthenticationError{Message: "invalid user name or password"}

func malformed(format string, args ...any) error {
	return &sdk.AuthenticationError{Message: "malformed SCRAM message: " + fmt.Sprintf(format, args...)}
}

// Step consumes a client message and returns the server's answer; done
// reports a verified client. A rejection is an *sdk.AuthenticationError;
// an error from the lookup other than sdk.ErrNotFound is returned as is.
func (s *Server) Step(ctx context.Context, msg []byte) (resp []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step = 1
		out, err := s.first(ctx, string(msg))
		return []byte(out), false, err
	case 1:
		s.step = 2
		out, err := s.final(string(msg))
		return []byte(out), err == nil, err
	}
	return nil, false, errors.New("scram: exchange already finished")
}

func (s *Server) first(ctx context.Context, msg string) (string, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return "", malformed("no GS2 header")
	}
	switch {
	case flag == "n" || flag == "y":
	case strings.HasPrefix(flag, "p="):
		return "", &sdk.AuthenticationError{Message: "SCRAM channel binding is not supported"}
	default:
		return "", malformed("GS2 flag %q", flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", malformed("no GS2 header")
	}
	s.gs2Header = flag + "," + authz + ","
	s.clientFirst = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || strings.HasPrefix(attrs[0], "m=") {
		return "", malformed("client-first message")
	}
	name, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return "", malformed("no user name")
	}
	user, err := unescapeName(name)
	if err != nil || user == "" {
		return "", malformed("user name")
	}
	if authz != "" {
		az, ok := strings.CutPrefix(authz, "a=")
		if a, err := unescapeName(az); !ok || err != nil || a != user {
			return "", &sdk.AuthenticationError{Message: "an authorization id other than the user name is not supported"}
		}
	}
	cnonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || cnonce == "" || !printable(cnonce) {
		return "", malformed("client nonce")
	}
	// attrs[2:] are extensions (Kafka's tokenauth=true among them); none
	// is honoured: delegation tokens are not served.
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "tokenauth=") && ext != "tokenauth=false" {
			return "", &sdk.AuthenticationError{Message: "delegation tokens are not supported"}
		}
	}
	s.user, s.clientNonce = user, cnonce
	cred, err := s.lookup(ctx, user, s.mech)
	switch {
	case err == nil:
		s.cred, s.known = cred, true
	case errors.Is(err, sdk.ErrNotFound):
		m := hmac.New(sha256.New, fakeSecret)
		m.Write([]byte(s.mech + "\x00" + user))
		s.cred = Credential{Mechanism: s.mech, Salt: m.Sum(nil)[:24], Iterations: MinIterations}
	default:
		return "", err
	}
	s.nonce = cnonce + serverNonce()
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return s.serverFirst, nil
}

func (s *Server) final(msg string) (string, error) {
	withoutProof, proofAttr, ok := cutLast(msg, ",")
	if !ok {
		return "", malformed("client-final message")
	}
	proof64, ok := strings.CutPrefix(proofAttr, "p=")
	if !ok {
		return "", malformed("no proof")
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 {
		return "", malformed("client-final message")
	}
	cb, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok || cb != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return "", malformed("channel binding does not match the GS2 header")
	}
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	// The exact nonce, or librdkafka < 2.6.1's client nonce + full nonce
	// (see the package doc).
	if !ok || (nonce != s.nonce && nonce != s.clientNonce+s.nonce) {
		return "", &sdk.AuthenticationError{Message: "SCRAM nonce mismatch"}
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != s.h().Size() {
		return "", malformed("proof")
	}
	authMessage := s.clientFirst + "," + s.serverFirst + "," + withoutProof
	if !s.known {
		return "", failed
	}
	sig := mac(s.h, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	hk := s.h()
	hk.Write(clientKey)
	if subtle.ConstantTimeCompare(hk.Sum(nil), s.cred.StoredKey) != 1 {
		return "", failed
	}
	return "v=" + base64.StdEncoding.EncodeToString(mac(s.h, s.cred.ServerKey, authMessage)), nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// unescapeName decodes RFC 5802's saslname (",": "=2C", "=": "=3D").
func unescapeName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("scram: bad escape in user name")
		}
		i += 2
	}
	return b.String(), nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}
