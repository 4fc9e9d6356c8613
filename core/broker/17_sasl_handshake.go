package broker

// SaslHandshake v0-v1 (KIP-43, KIP-152): the client names a SASL
// mechanism; the tokens then travel in SaslAuthenticate requests.
//
// v0 is advertised but not served. ApiVersions offers 0-1, as Kafka 3.x
// does, because librdkafka (Debian's kcat 1.7 runs 2.0)
// decides whether the broker supports SASL handshakes at all from a range
// that includes v0: offered only v1, it refuses to authenticate ("SASL
// Handshake not supported by broker"). Offered 0-1 together with
// SaslAuthenticate, librdkafka — like franz-go, sarama (its default
// SASLHandshakeV1) and the Java client — sends v1, so v1 framing is all
// those clients need. A v0 request means the client will next send raw
// SASL tokens outside Kafka framing, which the connection layer
// (core/wire) does not read; rather than misparse them, a v0 handshake is
// answered UNSUPPORTED_VERSION with the offered mechanisms and the
// connection closes, with a log line saying why. Kafka 4.0 dropped v0
// as well (KIP-896).
//
// On a PLAINTEXT listener, or once authenticated, the answer is
// ILLEGAL_SASL_STATE (the connection stays open). A mechanism that is not
// offered gets UNSUPPORTED_SASL_MECHANISM with the offered list, and the
// connection closes, as does a second handshake. The offered list is
// asked of the authenticators on each handshake, so a restarted plugin's
// answer counts; if an authenticator cannot be reached and no other
// offers the mechanism, the connection closes so the client retries.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

func handleSASLHandshake(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.SASLHandshakeRequest)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = req.Version
	if !saslListener(req.Conn) {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply(resp)
	}
	sc := b.saslConnFor(req.Conn)
	reauth := sc.state == saslAuthenticated && r.Version >= 1 && b.cfg.ConnectionsMaxReauthMs > 0
	if sc.state != saslStart && !reauth {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return &wire.Response{Msg: resp, CloseAfter: sc.state != saslAuthenticated}, nil
	}
	if reauth && r.Mechanism != sc.mechanism {
		// KIP-368: re-authentication keeps the mechanism.
		b.logger.Info("broker: SASL re-authentication with another mechanism refused", "conn", req.Conn.ID,
			"mechanism", r.Mechanism, "was", sc.mechanism)
		sc.state = saslFailed
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return &wire.Response{Msg: resp, CloseAfter: true}, nil
	}
	mechs, auths, offerErr := b.saslOffer(ctx, req.Conn.Listener)
	resp.SupportedMechanisms = mechs
	i := slices.Index(mechs, r.Mechanism)
	if i < 0 && offerErr != nil {
		return nil, offerErr
	}
	unsupported := func() (*wire.Response, error) {
		b.logger.Info("broker: SASL mechanism not offered", "conn", req.Conn.ID, "mechanism", r.Mechanism, "offered", mechs)
		sc.state = saslFailed
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return &wire.Response{Msg: resp, CloseAfter: true}, nil
	}
	if i < 0 {
		return unsupported()
	}
	if req.Version == 0 {
		b.logger.Info("broker: SaslHandshake v0 refused: raw SASL frames are not served, use v1 (SaslAuthenticate)", "conn", req.Conn.ID, "mechanism", r.Mechanism)
		sc.state = saslFailed
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return &wire.Response{Msg: resp, CloseAfter: true}, nil
	}
	st, err := auths[i].Start(ctx, &sdk.StartRequest{
		Mechanism:    r.Mechanism,
		ClientAddr:   req.Conn.Remote.String(),
		ListenerName: req.Conn.Listener,
	})
	switch {
	case errors.Is(err, sdk.ErrInvalidArgument):
		return unsupported()
	case err != nil:
		return nil, fmt.Errorf("broker: SASL %s start: %w", r.Mechanism, err)
	}
	sc.state, sc.mechanism, sc.auth, sc.session, sc.active, sc.reauth = saslHandshaken, r.Mechanism, auths[i], st.Session, true, reauth
	return reply(resp)
}
