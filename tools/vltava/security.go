package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/vltava/vltava/core/tlsconf"
)

// securityOpts turns -X settings (librdkafka's names, as kcat takes them)
// into client options: TLS with a CA and an optional client certificate,
// and SASL PLAIN or SCRAM.
func securityOpts(x []string) ([]kgo.Opt, error) {
	kv, err := keyValues(x)
	if err != nil {
		return nil, fmt.Errorf("-X: %w", err)
	}
	set := map[string]string{}
	for _, p := range kv {
		switch p[0] {
		case "security.protocol", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
			"ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password":
			set[p[0]] = p[1]
		default:
			return nil, fmt.Errorf("-X %s: unknown setting", p[0])
		}
	}
	proto := strings.ToUpper(set["security.protocol"])
	if proto == "" {
		proto = "PLAINTEXT"
	}
	var opts []kgo.Opt
	switch proto {
	case "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		f := tlsconf.Files{TruststoreLocation: set["ssl.ca.location"],
			VerifyHostname: !strings.EqualFold(set["ssl.endpoint.identification.algorithm"], "none")}
		if c, k := set["ssl.certificate.location"], set["ssl.key.location"]; c != "" || k != "" {
			cert, err := os.ReadFile(c)
			if err != nil {
				return nil, fmt.Errorf("-X ssl.certificate.location: %w", err)
			}
			key, err := os.ReadFile(k)
			if err != nil {
				return nil, fmt.Errorf("-X ssl.key.location: %w", err)
			}
			f.KeystoreCertificateChain, f.KeystoreKey = string(cert), string(key)
		}
		tc, err := f.Client()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	default:
		return nil, fmt.Errorf("-X security.protocol %q: want plaintext, ssl, sasl_plaintext or sasl_ssl", set["security.protocol"])
	}
	if strings.HasPrefix(proto, "SASL_") {
		mech := set["sasl.mechanism"]
		if mech == "" {
			mech = set["sasl.mechanisms"]
		}
		user, pass := set["sasl.username"], set["sasl.password"]
		switch strings.ToUpper(mech) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("-X sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
		}
	}
	return opts, nil
}
