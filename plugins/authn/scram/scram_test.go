package scram

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	xscram "github.com/xdg-go/scram"

	"github.com/vltava/vltava/plugins/sdk"
)

// rfcCred is RFC 7677's example user: password "pencil".
func rfcCred(t testing.TB) Credential {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	sp, err := SaltedPassword(SHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := FromSaltedPassword(SHA256, sp, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lookupOf(creds map[string]Credential) LookupFunc {
	return func(_ context.Context, user, mech string) (Credential, error) {
		c, ok := creds[user+"/"+mech]
		if !ok {
			return Credential{}, sdk.ErrNotFound
		}
		return c, nil
	}
}

// TestRFC7677Example replays the exchange of RFC 7677 section 3.
func TestRFC7677Example(t *testing.T) {
	old := serverNonce
	serverNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	defer func() { serverNonce = old }()
	s, _ := NewServer(SHA256, lookupOf(map[string]Credential{"user/" + SHA256: rfcCred(t)}))
	ctx := context.Background()
	first, done, err := s.Step(ctx, []byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: %v %v", err, done)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(first) != want {
		t.Fatalf("server-first %q, want %q", first, want)
	}
	final, done, err := s.Step(ctx, []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: %v %v", err, done)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(final) != want {
		t.Fatalf("server-final %q, want %q", final, want)
	}
	if s.User() != "user" {
		t.Fatalf("user %q", s.User())
	}
}

// converse runs a full exchange with xdg-go/scram's client (an
// independent implementation); mangle may rewrite the client-final.
func converse(t *testing.T, mech, user, pass string, creds map[string]Credential, mangle func(final, cnonce, nonce string) string) error {
	t.Helper()
	hash := xscram.SHA256
	if mech == SHA512 {
		hash = xscram.SHA512
	}
	cl, err := hash.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	s, err := NewServer(mech, lookupOf(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cf, _ := conv.Step("")
	sf, _, err := s.Step(ctx, []byte(cf))
	if err != nil {
		return err
	}
	fin, err := conv.Step(string(sf))
	if err != nil {
		t.Fatalf("client rejects server-first %q: %v", sf, err)
	}
	if mangle != nil {
		cnonce := strings.TrimPrefix(strings.Split(cf, ",")[3], "r=")
		nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
		fin = mangle(fin, cnonce, nonce)
	}
	sfin, done, err := s.Step(ctx, []byte(fin))
	if err != nil {
		return err
	}
	if !done {
		t.Fatal("not done after client-final")
	}
	if mangle == nil {
		if _, err := conv.Step(string(sfin)); err != nil || !conv.Valid() {
			t.Fatalf("client rejects the server signature: %v", err)
		}
	}
	return nil
}

func TestExchange(t *testing.T) {
	c256, _ := New(SHA256, "pw", 4096)
	c512, _ := New(SHA512, "pw", 8192)
	creds := map[string]Credential{"alice/" + SHA256: c256, "alice/" + SHA512: c512, "a=b,c/" + SHA256: c256}
	for _, mech := range Mechanisms {
		if err := converse(t, mech, "alice", "pw", creds, nil); err != nil {
			t.Errorf("%s: %v", mech, err)
		}
		for _, bad := range []struct{ user, pass string }{{"alice", "nope"}, {"mallory", "pw"}} {
			err := converse(t, mech, bad.user, bad.pass, creds, nil)
			var ae *sdk.AuthenticationError
			if !errors.As(err, &ae) || ae.Message != failed.Message {
				t.Errorf("%s %s/%s: %v, want %q", mech, bad.user, bad.pass, err, failed.Message)
			}
		}
	}
	// A user name with SCRAM's escaped characters.
	if err := converse(t, SHA256, "a=b,c", "pw", creds, nil); err != nil {
		t.Errorf("escaped name: %v", err)
	}
}

// TestNonceRules: the exact nonce and librdkafka < 2.6.1's client nonce +
// full nonce pass; anything else a suffix check would admit does not.
func TestNonceRules(t *testing.T) {
	c, _ := New(SHA512, "pw", 4096)
	creds := map[string]Credential{"alice/" + SHA512: c}
	// The proof covers the final message as sent, so a rewritten nonce
	// must be re-proved: rebuild the final with the same keys.
	rewrite := func(nonceOf func(cnonce, nonce string) string) func(string, string, string) string {
		return func(fin, cnonce, nonce string) string {
			return strings.Replace(fin, "r="+nonce, "r="+nonceOf(cnonce, nonce), 1)
		}
	}
	doubled := func(cnonce, nonce string) string { return cnonce + nonce }
	// The proof no longer matches after the rewrite, so a rewritten nonce
	// that passes the nonce check fails at the proof, and one that does
	// not pass fails as a nonce mismatch: the message tells them apart.
	for name, c := range map[string]struct {
		nonce   func(cnonce, nonce string) string
		nonceOK bool
	}{
		"doubled":      {doubled, true},
		"other-prefix": {func(_, n string) string { return "xyz" + n }, false},
		"truncated":    {func(_, n string) string { return n[:len(n)-1] }, false},
		"client-only":  {func(cn, _ string) string { return cn }, false},
	} {
		err := converse(t, SHA512, "alice", "pw", creds, rewrite(c.nonce))
		mismatch := err != nil && strings.Contains(err.Error(), "nonce mismatch")
		if mismatch == c.nonceOK {
			t.Errorf("%s: %v (nonce accepted: want %v)", name, err, c.nonceOK)
		}
	}
}

// TestDoubledNonceAuthenticates: a client that computes its proof over
// the doubled nonce, as librdkafka < 2.6.1 does, is admitted.
func TestDoubledNonceAuthenticates(t *testing.T) {
	cred, _ := New(SHA256, "pw", 4096)
	s, _ := NewServer(SHA256, lookupOf(map[string]Credential{"kcat/" + SHA256: cred}))
	ctx := context.Background()
	sf, _, err := s.Step(ctx, []byte("n,,n=kcat,r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
	withoutProof := "c=biws,r=abc" + nonce
	salted, _ := SaltedPassword(SHA256, "pw", cred.Salt, 4096)
	h, _ := hashFor(SHA256)
	clientKey := mac(h, salted, "Client Key")
	sig := mac(h, cred.StoredKey, "n=kcat,r=abc,"+string(sf)+","+withoutProof)
	for i := range clientKey {
		clientKey[i] ^= sig[i]
	}
	_, done, err := s.Step(ctx, []byte(withoutProof+",p="+base64.StdEncoding.EncodeToString(clientKey)))
	if err != nil || !done {
		t.Fatalf("doubled nonce: %v %v", err, done)
	}
}

func TestMalformed(t *testing.T) {
	ctx := context.Background()
	for _, msg := range []string{"", "n", "n,,", "p=tls-unique,,n=a,r=x", "n,,n=,r=x", "n,,n=a", "n,,n=a,r=", "x,,n=a,r=b", "n,a=bob,n=alice,r=x", "n,,n=a=zz,r=x", "n,,n=a,r=x,tokenauth=true"} {
		s, _ := NewServer(SHA256, lookupOf(nil))
		_, _, err := s.Step(ctx, []byte(msg))
		if !errors.Is(err, sdk.ErrAuthenticationFailed) {
			t.Errorf("client-first %q: %v, want an authentication failure", msg, err)
		}
	}
}

func TestCredentialRecord(t *testing.T) {
	c, err := New(SHA512, "secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if !c.CheckPassword("secret") || c.CheckPassword("Secret") {
		t.Fatal("CheckPassword")
	}
	if strings.Contains(string(c.Encode()), "secret") {
		t.Fatal("the record contains the password")
	}
	d, err := Decode(SHA512, c.Encode())
	if err != nil || !d.CheckPassword("secret") {
		t.Fatalf("decoded record: %v", err)
	}
	if _, err := Decode(SHA512, []byte(`{"salt":"AA==","iterations":1,"stored_key":"AA==","server_key":"AA=="}`)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short keys: %v", err)
	}
	user, mech, ok := ParseKey(Key("a/b c", SHA256))
	if !ok || user != "a/b c" || mech != SHA256 {
		t.Fatalf("ParseKey(Key) = %q %q %v", user, mech, ok)
	}
	if !strings.HasPrefix(Prefix, sdk.SecurityPrefix) {
		t.Fatal("credentials outside the prefix lent to authenticators")
	}
	if _, err := FromSaltedPassword(SHA256, make([]byte, 32), []byte("s"), 100); err == nil {
		t.Fatal("100 iterations accepted")
	}
}

// FuzzServer: no client message makes the server panic or admit without
// a valid proof.
func FuzzServer(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), []byte("c=biws,r=x,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("y,a=user,n=user,r=a,ext=1"), []byte("c=eSxhPXVzZXIs,r=a,p=AA=="))
	cred := rfcCred(f)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, _ := NewServer(SHA256, lookupOf(map[string]Credential{"user/" + SHA256: cred}))
		if _, _, err := s.Step(context.Background(), first); err != nil {
			return
		}
		if _, done, err := s.Step(context.Background(), final); done || err == nil {
			t.Fatalf("admitted without a valid proof: %q %q", first, final)
		}
	})
}
