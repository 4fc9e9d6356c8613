// Package kdctest runs a real MIT Kerberos KDC (Debian krb5-kdc and
// krb5-admin-server's kdb5_util, kadmin.local) on loopback for tests: a
// temp realm, database and config, principals and keytabs made with
// kadmin.local. The KDC process is stopped when the test ends.
package kdctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Realm is the test realm.
const Realm = "VLTAVA.TEST"

// KDC is a running test KDC.
type KDC struct {
	Dir      string // its files
	Krb5Conf string // krb5.conf for clients (KRB5_CONFIG)
	Port     int
	env      []string
}

func need(t testing.TB, bin, pkg string) string {
	t.Helper()
	for _, dir := range []string{"", "/usr/sbin/", "/usr/bin/"} {
		if p, err := exec.LookPath(dir + bin); err == nil {
			return p
		}
	}
	t.Skipf("%s not installed (Debian package %s)", bin, pkg)
	return ""
}

// Start starts a KDC for Realm, or skips the test when MIT Kerberos is
// not installed.
func Start(t testing.TB) *KDC {
	t.Helper()
	krb5kdc := need(t, "krb5kdc", "krb5-kdc")
	need(t, "kdb5_util", "krb5-kdc")
	need(t, "kadmin.local", "krb5-admin-server")
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	k := &KDC{Dir: dir, Krb5Conf: filepath.Join(dir, "krb5.conf"), Port: port}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("kdc.conf", fmt.Sprintf(`[kdcdefaults]
 kdc_listen = 127.0.0.1:%[1]d
 kdc_tcp_listen = 127.0.0.1:%[1]d
[realms]
 %[2]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  max_life = 10h
  max_renewable_life = 0
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }
[logging]
 kdc = FILE:%[3]s/kdc.log
`, port, Realm, dir))
	write("kadm5.acl", "")
	write("krb5.conf", fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_realm = false
 dns_lookup_kdc = false
 rdns = false
 dns_canonicalize_hostname = false
 udp_preference_limit = 1
 ticket_lifetime = 1h
 forwardable = false
 default_ccache_name = FILE:%[3]s/ccache
 default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
[realms]
 %[1]s = {
  kdc = 127.0.0.1:%[2]d
 }
[domain_realm]
 localhost = %[1]s
 127.0.0.1 = %[1]s
`, Realm, port, dir))
	k.env = append(os.Environ(), "KRB5_CONFIG="+k.Krb5Conf, "KRB5_KDC_PROFILE="+filepath.Join(dir, "kdc.conf"))
	k.run(t, "kdb5_util", "create", "-s", "-r", Realm, "-P", "master-password-for-tests")
	cmd := exec.Command(krb5kdc, "-n", "-r", Realm)
	cmd.Env = k.env
	out, _ := os.Create(filepath.Join(dir, "krb5kdc.out"))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "krb5kdc.out"))
			t.Fatalf("krb5kdc did not listen on %d:\n%s", port, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return k
}

// Env is the environment for Kerberos clients of this KDC (KRB5_CONFIG).
func (k *KDC) Env() []string { return k.env }

func (k *KDC) run(t testing.TB, bin string, args ...string) string {
	t.Helper()
	path := need(t, bin, "krb5-admin-server")
	cmd := exec.Command(path, args...)
	cmd.Env = k.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Kadmin runs one kadmin.local query.
func (k *KDC) Kadmin(t testing.TB, query string) string {
	t.Helper()
	return k.run(t, "kadmin.local", "-r", Realm, "-q", query)
}

// AddPrincipal creates principal with a random key and writes its keys
// to a new keytab file, whose path it returns.
func (k *KDC) AddPrincipal(t testing.TB, principal string) string {
	t.Helper()
	k.Kadmin(t, "addprinc -randkey "+principal)
	return k.Keytab(t, principal)
}

// Keytab writes principal's keys to a new keytab file (ktadd, which
// gives the principal new keys: keytabs written before hold an old key
// version).
func (k *KDC) Keytab(t testing.TB, principal string) string {
	t.Helper()
	path := filepath.Join(k.Dir, strings.NewReplacer("/", "_", "@", "_").Replace(principal)+fmt.Sprintf("-%d.keytab", time.Now().UnixNano()))
	k.Kadmin(t, "ktadd -k "+path+" "+principal)
	return path
}
