package broker

// SaslHandshake v1 (KIP-152): the client names a SASL mechanism; the
// tokens then travel in SaslAuthenticate requests. v0, after which the
// client sends raw SASL tokens outside Kafka framing, is not served (Kafka
// 4.0 dropped it too, KIP-896): a v0 request closes the connection.
// franz-go, librdkafka and sarama (Net.SASL.Version SASLHandshakeV1, its
// default) use v1.
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
	if sc.state != saslStart {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return &wire.Response{Msg: resp, CloseAfter: sc.state != saslAuthenticated}, nil
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
	sc.state, sc.mechanism, sc.auth, sc.session, sc.active = saslHandshaken, r.Mechanism, auths[i], st.Session, true
	return reply(resp)
}
