package etcd

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/vltava/vltava/plugins/sdk"
)

// Config is the store's configuration; the mapstructure names are the
// keys of metadata.store.config.
type Config struct {
	// Endpoints is "host:port,host:port" (an http:// or https:// scheme
	// is allowed; https is implied by the tls.* keys).
	Endpoints string `mapstructure:"endpoints"`
	// Prefix is prepended to every key ("/vltava" by default); a "/" is
	// added between it and the store's keys.
	Prefix string `mapstructure:"prefix"`

	Username string `mapstructure:"username"`
	Password string `mapstructure:"password"`

	TLSCAFile             string `mapstructure:"tls.ca.file"`
	TLSCertFile           string `mapstructure:"tls.cert.file"`
	TLSKeyFile            string `mapstructure:"tls.key.file"`
	TLSServerName         string `mapstructure:"tls.server.name"`
	TLSInsecureSkipVerify bool   `mapstructure:"tls.insecure.skip.verify"`

	// DialTimeout bounds connecting at Open (default 5s).
	DialTimeout time.Duration `mapstructure:"dial.timeout"`
	// RequestTimeout bounds one request; reaching it is ErrUnavailable
	// (default 10s).
	RequestTimeout time.Duration `mapstructure:"request.timeout"`
	// MaxValueBytes caps values (default 1 MiB; etcd's own request limit
	// is 1.5 MiB).
	MaxValueBytes int `mapstructure:"max.value.bytes"`
}

const (
	defaultPrefix         = "/vltava"
	defaultDialTimeout    = 5 * time.Second
	defaultRequestTimeout = 10 * time.Second
	defaultMaxValueBytes  = 1 << 20
	maxKeyBytes           = 4096
)

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if strings.TrimSpace(out.Endpoints) == "" {
		return out, fmt.Errorf("etcd store: config key \"endpoints\" is required: %w", sdk.ErrInvalidArgument)
	}
	if out.Prefix == "" {
		out.Prefix = defaultPrefix
	}
	out.Prefix = strings.TrimRight(out.Prefix, "/") + "/"
	if out.DialTimeout <= 0 {
		out.DialTimeout = defaultDialTimeout
	}
	if out.RequestTimeout <= 0 {
		out.RequestTimeout = defaultRequestTimeout
	}
	if out.MaxValueBytes <= 0 {
		out.MaxValueBytes = defaultMaxValueBytes
	}
	return out, nil
}

func (c *Config) tlsEnabled() bool {
	return c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSInsecureSkipVerify || c.TLSServerName != ""
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	if !c.tlsEnabled() {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, TrustedCAFile: c.TLSCAFile,
		ServerName: c.TLSServerName, InsecureSkipVerify: c.TLSInsecureSkipVerify}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd store: tls: %v: %w", err, sdk.ErrInvalidArgument)
	}
	return cfg, nil
}

// endpoints splits Endpoints and gives each a scheme.
func (c *Config) endpoints() []string {
	scheme := "http://"
	if c.tlsEnabled() {
		scheme = "https://"
	}
	var out []string
	for _, e := range strings.Split(c.Endpoints, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if !strings.Contains(e, "://") {
			e = scheme + e
		}
		out = append(out, e)
	}
	return out
}
