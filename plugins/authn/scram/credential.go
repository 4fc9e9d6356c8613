package scram

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strings"

	"github.com/vltava/vltava/plugins/sdk"
)

// Mechanism names, as clients send them in SaslHandshake.
const (
	SHA256 = "SCRAM-SHA-256"
	SHA512 = "SCRAM-SHA-512"
)

// Mechanisms lists the supported mechanisms, strongest first.
var Mechanisms = []string{SHA512, SHA256}

// Iteration bounds, as Kafka enforces them for AlterUserScramCredentials.
const (
	MinIterations = 4096
	MaxIterations = 16384
	// DefaultIterations is what `vltava user add` uses.
	DefaultIterations = 8192
)

// Prefix is where credentials live in the metadata store.
const Prefix = "/security/scram/"

// Errors.
var (
	ErrMechanism = errors.New("scram: unknown mechanism")
	ErrCorrupt   = errors.New("scram: corrupt credential record")
)

// hashFor returns the hash of a mechanism.
func hashFor(mech string) (func() hash.Hash, error) {
	switch mech {
	case SHA256:
		return sha256.New, nil
	case SHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("%w %q (want %s or %s)", ErrMechanism, mech, SHA256, SHA512)
}

// KafkaType is the mechanism's number in the Describe/AlterUserScramCredentials
// APIs (1 SCRAM-SHA-256, 2 SCRAM-SHA-512); 0 for an unknown name.
func KafkaType(mech string) int8 {
	switch mech {
	case SHA256:
		return 1
	case SHA512:
		return 2
	}
	return 0
}

// MechanismOf is KafkaType's inverse; "" for an unknown number.
func MechanismOf(kafkaType int8) string {
	switch kafkaType {
	case 1:
		return SHA256
	case 2:
		return SHA512
	}
	return ""
}

// Credential is what the server keeps of a user's password for one
// mechanism.
type Credential struct {
	Mechanism  string `json:"-"`
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// SaltedPassword is PBKDF2-HMAC-H(password, salt, iterations), RFC 5802's
// Hi().
func SaltedPassword(mech, password string, salt []byte, iterations int) ([]byte, error) {
	h, err := hashFor(mech)
	if err != nil {
		return nil, err
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// FromSaltedPassword derives the stored credential from a salted password
// (what AlterUserScramCredentials carries).
func FromSaltedPassword(mech string, salted, salt []byte, iterations int) (Credential, error) {
	h, err := hashFor(mech)
	if err != nil {
		return Credential{}, err
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("scram: %d iterations (want %d..%d)", iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 || len(salted) != h().Size() {
		return Credential{}, fmt.Errorf("scram: salt of %d bytes and salted password of %d bytes (want a salt and %d bytes)", len(salt), len(salted), h().Size())
	}
	clientKey := mac(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return Credential{
		Mechanism:  mech,
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  mac(h, salted, "Server Key"),
	}, nil
}

// New derives a credential from a password with a fresh random salt.
func New(mech, password string, iterations int) (Credential, error) {
	salt := make([]byte, 24)
	rand.Read(salt)
	salted, err := SaltedPassword(mech, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return FromSaltedPassword(mech, salted, salt, iterations)
}

// CheckPassword reports whether password matches the credential (SASL
// PLAIN against a SCRAM credential), in time independent of where the
// keys differ.
func (c Credential) CheckPassword(password string) bool {
	salted, err := SaltedPassword(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	d, err := FromSaltedPassword(c.Mechanism, salted, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(d.StoredKey, c.StoredKey) == 1
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Key is the store key of a user's credential for a mechanism.
func Key(user, mech string) string { return UserPrefix(user) + mech }

// UserPrefix is the store prefix of all of a user's credentials.
func UserPrefix(user string) string { return Prefix + url.PathEscape(user) + "/" }

// ParseKey splits a credential key into user and mechanism.
func ParseKey(key string) (user, mech string, ok bool) {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return "", "", false
	}
	esc, mech, ok := strings.Cut(rest, "/")
	if !ok {
		return "", "", false
	}
	user, err := url.PathUnescape(esc)
	if err != nil || KafkaType(mech) == 0 {
		return "", "", false
	}
	return user, mech, true
}

// Encode is the credential's store value.
func (c Credential) Encode() []byte {
	b, _ := json.Marshal(c)
	return b
}

// Decode parses a store value for mech.
func Decode(mech string, value []byte) (Credential, error) {
	var c Credential
	if err := json.Unmarshal(value, &c); err != nil {
		return Credential{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	c.Mechanism = mech
	h, err := hashFor(mech)
	if err != nil {
		return Credential{}, err
	}
	if len(c.Salt) == 0 || c.Iterations < 1 || len(c.StoredKey) != h().Size() || len(c.ServerKey) != h().Size() {
		return Credential{}, fmt.Errorf("%w: %s record with %d-byte keys, %d iterations", ErrCorrupt, mech, len(c.StoredKey), c.Iterations)
	}
	return c, nil
}

// Lookup reads a user's credential for mech; sdk.ErrNotFound if none.
func Lookup(ctx context.Context, store sdk.MetadataStore, user, mech string) (Credential, error) {
	resp, err := store.Get(ctx, &sdk.GetRequest{Key: Key(user, mech)})
	if err != nil {
		return Credential{}, err
	}
	return Decode(mech, resp.Value)
}
