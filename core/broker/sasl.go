package broker

// Per-connection SASL state (KIP-43, KIP-152, KIP-368). On a SASL
// listener (SASL_PLAINTEXT, SASL_SSL) a connection moves through
//
//	start ──SaslHandshake──▶ handshaken ──SaslAuthenticate*──▶ authenticated
//	                          ▲          └──────────────────▶ failed (closed)
//	                          └──── SaslHandshake v1 (re-authentication) ──┘
//
// Before it is authenticated only ApiVersions, SaslHandshake and
// SaslAuthenticate are served; any other request closes the connection,
// as Kafka does, and frames are capped at sasl.server.max.receive.size
// (core/wire). A failed handshake or authentication answers with its
// error code and then closes the connection.
//
// KIP-368: with connections.max.reauth.ms positive, a SaslAuthenticate
// v1+ success answers SessionLifetimeMs = connections.max.reauth.ms and
// the session expires then; the client re-authenticates on the same
// connection (SaslHandshake v1 with the same mechanism, then
// SaslAuthenticate, as the same principal). A request other than
// SaslHandshake, SaslAuthenticate or ApiVersions after expiry closes the
// connection. Clients that authenticated with SaslAuthenticate v0 cannot
// re-authenticate and get no lifetime, as in Kafka. With
// connections.max.reauth.ms 0 (the default) a second SaslHandshake is
// answered ILLEGAL_SASL_STATE.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

// saslState is where a connection is in the diagram above.
type saslState int

const (
	saslStart saslState = iota
	saslHandshaken
	saslAuthenticated
	saslFailed
)

// saslConn is one connection's SASL conversation.
// INVARIANT: only the connection's Handle calls (sequential) and then its
// ConnClosed touch a saslConn, so it needs no lock.
type saslConn struct {
	state     saslState
	mechanism string
	auth      sdk.Authenticator
	session   string
	// active: the authenticator holds the session (Start succeeded, Step
	// has not returned Done or an authentication failure), so End is due
	// if the connection closes.
	active bool
	// reauth: this conversation re-authenticates an authenticated
	// connection (KIP-368); its principal must not change.
	reauth bool
	// expires is when the authenticated session ends (zero: never).
	expires time.Time
}

// endTimeout bounds the End call made when a connection closes mid
// conversation; shutdown waits for it.
const endTimeout = 2 * time.Second

// saslListener reports whether conn arrived on a listener that requires
// SASL authentication.
func saslListener(conn *wire.ConnInfo) bool {
	return conn != nil && config.IsSASLProtocol(conn.Protocol)
}

// saslConnFor returns the connection's SASL state, creating it.
func (b *Broker) saslConnFor(conn *wire.ConnInfo) *saslConn {
	v, _ := b.sasl.LoadOrStore(conn.ID, &saslConn{})
	return v.(*saslConn)
}

// checkAuthenticated refuses a request that a SASL listener may not serve
// before authentication; the error closes the connection.
func (b *Broker) checkAuthenticated(req *wire.Request) error {
	if !saslListener(req.Conn) {
		return nil
	}
	switch req.Key {
	case 17, 18, 36: // SaslHandshake, ApiVersions, SaslAuthenticate
		return nil
	}
	v, ok := b.sasl.Load(req.Conn.ID)
	if !ok || v.(*saslConn).state != saslAuthenticated {
		return fmt.Errorf("broker: api key %d before SASL authentication on a %s listener", req.Key, req.Conn.Listener)
	}
	if sc := v.(*saslConn); !sc.expires.IsZero() && time.Now().After(sc.expires) {
		return fmt.Errorf("broker: api key %d after the SASL session of %s expired (connections.max.reauth.ms) without re-authentication",
			req.Key, req.Conn.Principal)
	}
	return nil
}

// ConnClosed drops the connection's SASL state and ends a conversation the
// authenticator still holds. It implements wire.ConnCloser.
func (b *Broker) ConnClosed(conn *wire.ConnInfo) {
	b.clientClosed(conn)
	v, ok := b.sasl.LoadAndDelete(conn.ID)
	if !ok {
		return
	}
	sc := v.(*saslConn)
	if !sc.active {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), endTimeout)
	defer cancel()
	if _, err := sc.auth.End(ctx, &sdk.EndRequest{Session: sc.session}); err != nil {
		b.logger.Warn("broker: ending SASL session", "conn", conn.ID, "mechanism", sc.mechanism, "err", err)
	}
}

// saslOffer lists the mechanisms offered on a listener, each with the
// first authenticator that offers it, filtered by sasl.enabled.mechanisms.
// err reports an authenticator that could not be asked; the others'
// mechanisms are still listed.
func (b *Broker) saslOffer(ctx context.Context, listener string) (mechs []string, auths []sdk.Authenticator, err error) {
	enabled := b.cfg.SASLMechanisms()
	for _, a := range b.authenticators {
		resp, aerr := a.Mechanisms(ctx, &sdk.MechanismsRequest{ListenerName: listener})
		if aerr != nil {
			err = fmt.Errorf("broker: authenticator mechanisms: %w", aerr)
			continue
		}
		for _, m := range resp.Mechanisms {
			if (enabled == nil || slices.Contains(enabled, m)) && !slices.Contains(mechs, m) {
				mechs = append(mechs, m)
				auths = append(auths, a)
			}
		}
	}
	return mechs, auths, err
}

// checkSASLConfig runs at startup: a SASL listener needs an authenticator,
// and every enabled mechanism must be offered by one.
func (b *Broker) checkSASLConfig(ctx context.Context) error {
	ls, err := b.cfg.ParseListeners()
	if err != nil {
		return err
	}
	proto := ""
	for _, l := range ls {
		if l.SASL() {
			proto = l.Name
			break
		}
	}
	if proto == "" {
		return nil
	}
	if len(b.authenticators) == 0 {
		return fmt.Errorf("broker: listener %s needs an authenticator and none is configured", proto)
	}
	mechs, _, err := b.saslOffer(ctx, proto)
	if err != nil {
		return err
	}
	for _, m := range b.cfg.SASLMechanisms() {
		if !slices.Contains(mechs, m) {
			return fmt.Errorf("broker: sasl.enabled.mechanisms: %s is offered by no authenticator (they offer %v)", m, mechs)
		}
	}
	if len(mechs) == 0 {
		return fmt.Errorf("broker: listener %s: no SASL mechanism enabled", proto)
	}
	return nil
}
