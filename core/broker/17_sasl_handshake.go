package broker

// SaslHandshake v0-v1 (KIP-43, KIP-152): the client names a SASL
// mechanism; the tokens then travel in SaslAuthenticate requests.
//
// v0 (KIP-43's original exchange) is served: after a v0 handshake the
// client sends each SASL token as a bare size-prefixed frame, without a
// request header, and reads the server's tokens the same way. The
// handshake tells the connection layer so (wire.ConnInfo.SetRawSASL), and
// each raw token reaches handleSASLAuthenticate as a SaslAuthenticate v0
// request marked RawSASL; a failed raw exchange closes the connection
// without an answer, as Kafka does, since the raw framing carries no
// error code. ApiVersions offers 0-1, as Kafka 3.x does: librdkafka
// decides whether the broker supports SASL handshakes at all from a range
// that includes v0 (offered only v1 it refuses to authenticate, "SASL
// Handshake not supported by broker"), then sends v1 as franz-go, sarama
// and the Java client do. A v0 client cannot re-authenticate (KIP-368).
// Kafka 4.0 dropped v0 (KIP-896).

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
	if req.Version == 0 {
		req.Conn.SetRawSASL(true) // before the answer: the client's tokens follow it
	}
	return reply(resp)
}
