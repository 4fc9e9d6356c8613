// Package zktest starts real ZooKeeper servers (Debian package zookeeper,
// run with java) for tests: a standalone server or an ensemble, on
// loopback ports chosen at run time, each with a generated zoo.cfg and
// data directory in the test's temp dir, killed (process group, SIGKILL)
// when the test ends. Tests skip when java or the ZooKeeper jar is
// missing.
package zktest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/metastore/internal/servertest"
)

// DefaultJar is where Debian's zookeeper package installs the server.
const DefaultJar = "/usr/share/java/zookeeper.jar"

// slf4jSimple is Debian's libslf4j-java binding (a dependency of the
// zookeeper package): server logs go to the process output.
const slf4jSimple = "/usr/share/java/slf4j-simple.jar"

// nettyJars are the parts of Debian's libnetty-java (a dependency of the
// zookeeper package) that the Netty connection factory of a TLS client
// port needs beyond the jar manifest's class path.
var nettyJars = []string{"netty-codec", "netty-resolver", "netty-transport-native-unix-common"}

// Binary returns java and the server jar ($VLTAVA_ZOOKEEPER_JAR, else
// Debian's).
func Binary() (java, jar string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", err
	}
	jar = os.Getenv("VLTAVA_ZOOKEEPER_JAR")
	if jar == "" {
		jar = DefaultJar
	}
	if _, err := os.Stat(jar); err != nil {
		return "", "", err
	}
	return java, jar, nil
}

// SkipIfMissing skips the test when ZooKeeper cannot run here.
func SkipIfMissing(t testing.TB) {
	t.Helper()
	if _, _, err := Binary(); err != nil {
		t.Skip("ZooKeeper not installed (Debian package zookeeper): ", err)
	}
}

// Ensemble is a running ZooKeeper ensemble (one server is standalone).
type Ensemble struct {
	t       testing.TB
	java    string
	jar     string
	tls     *TLS
	Servers []*Server
}

// Server is one ZooKeeper server.
type Server struct {
	ID         int
	ClientAddr string // 127.0.0.1:port
	SecureAddr string // TLS client port, with StartTLS
	dir        string
	proc       *servertest.Proc
}

// TLS adds a TLS client port (secureClientPort, Netty) with a PEM key
// store (private key and certificate in one file) and a PEM trust store.
type TLS struct {
	KeyStore, TrustStore string
}

// Start starts n servers and waits until each serves requests.
func Start(t testing.TB, n int) *Ensemble {
	t.Helper()
	return StartTLS(t, n, nil)
}

// StartTLS is Start with a TLS client port on every server when tls is
// not nil (Server.SecureAddr).
func StartTLS(t testing.TB, n int, tls *TLS) *Ensemble {
	t.Helper()
	java, jar, err := Binary()
	if err != nil {
		t.Skip("ZooKeeper not installed (Debian package zookeeper): ", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a program outside the tests may take a reserved port meanwhile
		e, err := start(t, java, jar, n, tls)
		if err == nil {
			return e
		}
		lastErr = err
	}
	t.Fatalf("zktest: %v", lastErr)
	return nil
}

func start(t testing.TB, java, jar string, n int, tls *TLS) (*Ensemble, error) {
	ports := servertest.FreePorts(t, 4*n)
	e := &Ensemble{t: t, java: java, jar: jar, tls: tls}
	var quorum []string
	for i := range n {
		s := &Server{ID: i + 1, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[3*i]), dir: t.TempDir()}
		if tls != nil {
			s.SecureAddr = fmt.Sprintf("127.0.0.1:%d", ports[3*n+i])
		}
		e.Servers = append(e.Servers, s)
		quorum = append(quorum, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", s.ID, ports[3*i+1], ports[3*i+2]))
	}
	for i, s := range e.Servers {
		cfg := []string{
			"tickTime=100",
			"initLimit=100",
			"syncLimit=50",
			"dataDir=" + filepath.Join(s.dir, "data"),
			fmt.Sprintf("clientPort=%d", ports[3*i]),
			"clientPortAddress=127.0.0.1",
			"admin.enableServer=false",
			"minSessionTimeout=200",
			"maxSessionTimeout=60000",
			"4lw.commands.whitelist=ruok,srvr",
			"autopurge.purgeInterval=0",
		}
		if n > 1 {
			cfg = append(cfg, quorum...)
		}
		if tls != nil {
			_, port, _ := strings.Cut(s.SecureAddr, ":")
			cfg = append(cfg, "secureClientPort="+port, "secureClientPortAddress=127.0.0.1",
				"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
				"ssl.keyStore.location="+tls.KeyStore, "ssl.keyStore.type=PEM",
				"ssl.trustStore.location="+tls.TrustStore, "ssl.trustStore.type=PEM",
				"ssl.clientAuth=none")
		}
		if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(s.dir, "data", "myid"), fmt.Appendf(nil, "%d\n", s.ID), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
			return nil, err
		}
		e.launch(s)
	}
	for _, s := range e.Servers {
		if err := s.proc.WaitFor(60*time.Second, s.serving); err != nil {
			for _, s := range e.Servers {
				s.proc.Kill()
			}
			return nil, err
		}
	}
	return e, nil
}

func (e *Ensemble) launch(s *Server) {
	cp := e.jar
	if _, err := os.Stat(slf4jSimple); err == nil {
		cp += ":" + slf4jSimple
	}
	if e.tls != nil {
		for _, j := range nettyJars {
			cp += ":/usr/share/java/" + j + ".jar"
		}
	}
	s.proc = servertest.Start(e.t, s.dir, e.java,
		"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+s.dir, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.dir, "zoo.cfg"))
}

// serving asks the four-letter word srvr: a server that is up but not in
// a quorum answers without a Mode line.
func (s *Server) serving() error {
	c, err := net.DialTimeout("tcp", s.ClientAddr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Mode: ") {
			return nil
		}
	}
	return fmt.Errorf("server %d not serving yet", s.ID)
}

// SecureConnect is the connect string of the TLS client ports.
func (e *Ensemble) SecureConnect() string {
	var addrs []string
	for _, s := range e.Servers {
		addrs = append(addrs, s.SecureAddr)
	}
	return strings.Join(addrs, ",")
}

// Connect is the connect string "127.0.0.1:p1,127.0.0.1:p2,..." (no
// chroot).
func (e *Ensemble) Connect() string {
	var addrs []string
	for _, s := range e.Servers {
		addrs = append(addrs, s.ClientAddr)
	}
	return strings.Join(addrs, ",")
}

// Kill kill -9s server i.
func (e *Ensemble) Kill(i int) { e.Servers[i].proc.Kill() }

// Restart starts a killed server i again on its data directory and waits
// until it serves.
func (e *Ensemble) Restart(i int) {
	e.t.Helper()
	s := e.Servers[i]
	s.proc.Kill()
	e.launch(s)
	if err := s.proc.WaitFor(60*time.Second, s.serving); err != nil {
		e.t.Fatalf("zktest: restart server %d: %v", s.ID, err)
	}
}

// Leader returns the index of the server in Mode leader, or -1.
func (e *Ensemble) Leader() int {
	for i, s := range e.Servers {
		if s.proc.Exited() {
			continue
		}
		if mode, _ := s.mode(); mode == "leader" {
			return i
		}
	}
	return -1
}

// mode asks srvr for the server's Mode (standalone, leader, follower).
func (s *Server) mode() (string, error) {
	c, err := net.DialTimeout("tcp", s.ClientAddr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return m, nil
		}
	}
	return "", fmt.Errorf("server %d: no Mode line", s.ID)
}
