package tlsconf

import (
	"strings"
	"testing"
)

// FuzzParseRules: any ssl.principal.mapping.rules text parses or fails
// cleanly, and a parsed list maps any subject without panicking.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"", "DEFAULT", `RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT`, `RULE:a\/b/c/U`, "RULE:/", "RULE:x/y/Z", "RULE:(/$9/,\nDEFAULT"} {
		f.Add(s, "CN=alice,O=Example")
	}
	f.Fuzz(func(t *testing.T, rules, subject string) {
		rs, err := ParseRules(rules)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tlsconf: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		rs.Map(subject)
	})
}

// FuzzKeystore: inline keystore PEM of any shape loads or fails with an
// error, never a panic.
func FuzzKeystore(f *testing.F) {
	f.Add("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
	f.Add("", "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00000000000000000000000000000000\n\nAAAA\n-----END EC PRIVATE KEY-----\n")
	f.Fuzz(func(t *testing.T, chain, key string) {
		files := Files{KeystoreCertificateChain: chain, KeystoreKey: key, KeyPassword: "pw", TruststoreCertificates: chain}
		if _, err := files.Certificate(); err == nil {
			t.Fatal("random bytes made a valid keystore")
		}
		files.Roots()
	})
}
