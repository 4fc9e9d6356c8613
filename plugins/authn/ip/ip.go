// Package ip is the "ip" authenticator: CIDR allow and deny rules on the
// client's address, evaluated when the broker accepts a connection and
// before it reads any byte of a request (sdk.ConnFilter). It offers no
// SASL mechanism; on a SASL listener list it next to one that does.
//
//	sasl.authenticators: ip            # on a PLAINTEXT listener, or ip,simple
//	sasl.authenticator.config:
//	  ip:
//	    rules:
//	      - {deny: 10.1.2.0/24}
//	      - {allow: 127.0.0.1/32, principal: ops}
//	      - {allow: 10.0.0.0/8, principal: internal}
//	    default: deny                  # for an address no rule matches (default deny)
//	    listeners: [PLAINTEXT]         # the listeners it applies to (default: all)
//
// Rules are tried in order and the first whose network holds the address
// decides. An allow rule's principal (User:<name>) becomes the
// connection's until SASL authentication, if any, replaces it; without
// one the connection stays User:ANONYMOUS. A refusal names the rule
// ("rule 1: deny 10.1.2.0/24"), which the broker logs with the address
// before closing the connection. IPv4-mapped IPv6 addresses match IPv4
// rules.
package ip

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Rule is one config entry: exactly one of Allow and Deny.
type Rule struct {
	Allow     string `mapstructure:"allow"`
	Deny      string `mapstructure:"deny"`
	Principal string `mapstructure:"principal"`
}

// Config is the plugin's configuration.
type Config struct {
	Rules     []Rule   `mapstructure:"rules"`
	Default   string   `mapstructure:"default"`
	Listeners []string `mapstructure:"listeners"`
}

type rule struct {
	allow     bool
	prefix    netip.Prefix
	principal string
	text      string
}

type policy struct {
	rules        []rule
	defaultAllow bool
	listeners    []string
}

// Authenticator is the ip authenticator. The zero value refuses every
// address until configured.
type Authenticator struct {
	p atomic.Pointer[policy]
}

// New returns an authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{}
	return a, a.set(cfg)
}

// Configure decodes Config (serve.Configurer).
func (a *Authenticator) Configure(ctx context.Context, raw map[string]any) error {
	var cfg Config
	if err := serve.DecodeConfig(raw, &cfg); err != nil {
		return err
	}
	return a.set(cfg)
}

func (a *Authenticator) set(cfg Config) error {
	p := &policy{listeners: cfg.Listeners}
	switch cfg.Default {
	case "", "deny":
	case "allow":
		p.defaultAllow = true
	default:
		return fmt.Errorf("config: key %q: %q (want allow or deny): %w", "default", cfg.Default, sdk.ErrInvalidArgument)
	}
	for i, r := range cfg.Rules {
		cidr, allow := r.Allow, true
		if (r.Allow == "") == (r.Deny == "") {
			return fmt.Errorf("config: key \"rules\": rule %d: give exactly one of allow and deny: %w", i+1, sdk.ErrInvalidArgument)
		}
		if r.Deny != "" {
			cidr, allow = r.Deny, false
			if r.Principal != "" {
				return fmt.Errorf("config: key \"rules\": rule %d: a deny rule takes no principal: %w", i+1, sdk.ErrInvalidArgument)
			}
		}
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			addr, aerr := netip.ParseAddr(cidr)
			if aerr != nil {
				return fmt.Errorf("config: key \"rules\": rule %d: %q is not a CIDR or an address: %w", i+1, cidr, sdk.ErrInvalidArgument)
			}
			pfx = netip.PrefixFrom(addr, addr.BitLen())
		}
		verb := "deny"
		if allow {
			verb = "allow"
		}
		p.rules = append(p.rules, rule{allow: allow, prefix: pfx.Masked(), principal: r.Principal,
			text: fmt.Sprintf("rule %d: %s %s", i+1, verb, pfx.Masked())})
	}
	a.p.Store(p)
	return nil
}

// Admit decides on a connection (sdk.ConnFilter).
func (a *Authenticator) Admit(ctx context.Context, req *sdk.AdmitRequest) (*sdk.AdmitResponse, error) {
	p := a.p.Load()
	if p == nil {
		return &sdk.AdmitResponse{Reason: "ip authenticator not configured"}, nil
	}
	if len(p.listeners) > 0 && !slices.Contains(p.listeners, req.ListenerName) {
		return &sdk.AdmitResponse{Allowed: true}, nil
	}
	ap, err := netip.ParseAddrPort(req.ClientAddr)
	if err != nil {
		return &sdk.AdmitResponse{Reason: fmt.Sprintf("unparsable client address %q", req.ClientAddr)}, nil
	}
	addr := ap.Addr().Unmap()
	for _, r := range p.rules {
		if r.prefix.Contains(addr) {
			resp := &sdk.AdmitResponse{Allowed: r.allow, Reason: r.text}
			if r.allow && r.principal != "" {
				resp.Principal = sdk.Principal{Type: sdk.PrincipalTypeUser, Name: r.principal}
			}
			return resp, nil
		}
	}
	if p.defaultAllow {
		return &sdk.AdmitResponse{Allowed: true, Reason: "no rule matches; default allow"}, nil
	}
	return &sdk.AdmitResponse{Reason: "no rule matches; default deny"}, nil
}

// Mechanisms offers none: the ip authenticator only filters connections.
func (a *Authenticator) Mechanisms(context.Context, *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	return &sdk.MechanismsResponse{}, nil
}

// Start refuses every mechanism.
func (a *Authenticator) Start(_ context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	return nil, fmt.Errorf("ip: offers no SASL mechanism (asked for %q): %w", req.Mechanism, sdk.ErrInvalidArgument)
}

// Step knows no session.
func (a *Authenticator) Step(_ context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	return nil, fmt.Errorf("ip: unknown session %q: %w", req.Session, sdk.ErrInvalidArgument)
}

// End has nothing to end.
func (a *Authenticator) End(context.Context, *sdk.EndRequest) (*sdk.EndResponse, error) {
	return &sdk.EndResponse{}, nil
}
