package zookeeper

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// Config is the store's configuration; the mapstructure names are the
// keys of metadata.store.config. The daemon fills connect from Kafka's
// zookeeper.connect and session.timeout from zookeeper.session.timeout.ms.
type Config struct {
	// Connect is Kafka's zookeeper.connect: "host:port,host:port/chroot".
	// Without a chroot the store lives under /vltava.
	Connect string `mapstructure:"connect"`
	// SessionTimeout is the ZooKeeper session timeout (default 18s, as
	// Kafka's zookeeper.session.timeout.ms). A store session is granted
	// at least this TTL: a crashed broker is seen after it.
	SessionTimeout time.Duration `mapstructure:"session.timeout"`
	// RequestTimeout bounds one request; reaching it is ErrUnavailable
	// (default 10s).
	RequestTimeout time.Duration `mapstructure:"request.timeout"`
	// Digest is "user:password" for ZooKeeper digest auth. When set, every
	// znode the store creates gets an ACL granting that identity all
	// permissions and nobody else anything.
	Digest string `mapstructure:"auth.digest"`
	// TLS for the client port (ZooKeeper's secureClientPort).
	TLSCAFile             string `mapstructure:"tls.ca.file"`
	TLSCertFile           string `mapstructure:"tls.cert.file"`
	TLSKeyFile            string `mapstructure:"tls.key.file"`
	TLSInsecureSkipVerify bool   `mapstructure:"tls.insecure.skip.verify"`
	// LogRetention is how many revisions of change log the store keeps
	// for watches (default 10000); older ones are compacted.
	LogRetention int `mapstructure:"log.retention"`
	// MaxValueBytes caps values (default 256 KiB): a write carries its
	// value twice (key and change log) and ZooKeeper's jute.maxbuffer
	// caps a request at 1 MiB.
	MaxValueBytes int `mapstructure:"max.value.bytes"`
}

const (
	defaultChroot         = "/vltava"
	defaultSessionTimeout = 18 * time.Second
	defaultRequestTimeout = 10 * time.Second
	defaultLogRetention   = 10000
	defaultMaxValueBytes  = 256 << 10
	maxKeyBytes           = 4096
)

// parsed is a validated Config.
type parsed struct {
	Config
	servers []string
	chroot  string
	tls     *tls.Config
}

func (c Config) parse() (*parsed, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("zookeeper store: config: %s: %w", fmt.Sprintf(format, args...), sdk.ErrInvalidArgument)
	}
	p := &parsed{Config: c}
	conn := strings.TrimSpace(c.Connect)
	if conn == "" {
		return nil, bad("key \"connect\" (zookeeper.connect) is required")
	}
	hosts, chroot := conn, ""
	if i := strings.IndexByte(conn, '/'); i >= 0 {
		hosts, chroot = conn[:i], conn[i:]
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			p.servers = append(p.servers, h)
		}
	}
	if len(p.servers) == 0 {
		return nil, bad("connect %q names no server", c.Connect)
	}
	chroot = strings.TrimRight(chroot, "/")
	if chroot == "" {
		chroot = defaultChroot
	}
	if path.Clean(chroot) != chroot {
		return nil, bad("chroot %q is not a clean path", chroot)
	}
	p.chroot = chroot
	if p.SessionTimeout <= 0 {
		p.SessionTimeout = defaultSessionTimeout
	}
	if p.RequestTimeout <= 0 {
		p.RequestTimeout = defaultRequestTimeout
	}
	if p.LogRetention <= 0 {
		p.LogRetention = defaultLogRetention
	}
	if p.MaxValueBytes <= 0 {
		p.MaxValueBytes = defaultMaxValueBytes
	}
	if c.Digest != "" && !strings.Contains(c.Digest, ":") {
		return nil, bad("auth.digest must be user:password")
	}
	if c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSInsecureSkipVerify {
		cfg := &tls.Config{InsecureSkipVerify: c.TLSInsecureSkipVerify, MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, bad("tls.ca.file: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, bad("tls.ca.file %s holds no PEM certificate", c.TLSCAFile)
			}
		}
		if c.TLSCertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
			if err != nil {
				return nil, bad("tls.cert.file/tls.key.file: %v", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		p.tls = cfg
	}
	return p, nil
}
