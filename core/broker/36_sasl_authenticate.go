package broker

// SaslAuthenticate v0-v2 (KIP-152): one SASL token each way, after
// SaslHandshake. v1 adds SessionLifetimeMs: connections.max.reauth.ms
// when positive (KIP-368, see sasl.go); v2 is flexible.
//
// Each request is one Step of the authenticator session the handshake
// started. Done sets the connection's principal. A rejected client gets
// SASL_AUTHENTICATION_FAILED with the authenticator's message and the
// connection closes; an internal authenticator error gets the same code
// with a generic message (the detail goes to the log). An authenticator
// that is unavailable (sdk.ErrUnavailable, or the request's context ends)
// closes the connection without an answer, so the client retries rather
// than treating its credentials as bad.
//
// After a SaslHandshake v0 the tokens arrive raw (req.RawSASL, see
// 17_sasl_handshake.go) and are served here alike; completing
// authentication turns the connection back to Kafka requests
// (wire.ConnInfo.SetRawSASL(false)) before the last token is answered.
//
// Outside a conversation — on a PLAINTEXT listener or once authenticated —
// the answer is ILLEGAL_SASL_STATE; before a handshake on a SASL listener
// the connection also closes.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

func handleSASLAuthenticate(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.SASLAuthenticateRequest)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = req.Version
	fail := func(code int16, msg string, closeAfter bool) (*wire.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return &wire.Response{Msg: resp, CloseAfter: closeAfter}, nil
	}
	if !saslListener(req.Conn) {
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate on a listener without SASL", false)
	}
	sc := b.saslConnFor(req.Conn)
	switch sc.state {
	case saslAuthenticated:
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate after successful authentication", false)
	case saslStart, saslFailed:
		return fail(kerr.IllegalSaslState.Code, "SaslAuthenticate before a successful SaslHandshake", true)
	}
	out, err := sc.auth.Step(ctx, &sdk.StepRequest{Session: sc.session, Token: r.SASLAuthBytes})
	log := b.logger.With("conn", req.Conn.ID, "remote", req.Conn.Remote.String(), "mechanism", sc.mechanism)
	var authErr *sdk.AuthenticationError
	switch {
	case err == nil && !out.Done:
		resp.SASLAuthBytes = out.Token
		return reply(resp)
	case err == nil:
		p := out.Principal
		if p.Type == "" {
			p.Type = sdk.PrincipalTypeUser
		}
		sc.active = false
		if p.Name == "" {
			sc.state = saslFailed
			log.Warn("broker: authenticator reported success without a principal name")
			return fail(kerr.SaslAuthenticationFailed.Code, "Authentication failed due to an internal error", true)
		}
		if sc.reauth && p != req.Conn.Principal {
			sc.state = saslFailed
			log.Warn("broker: SASL re-authentication as another principal refused", "principal", p.String(), "was", req.Conn.Principal.String())
			return fail(kerr.SaslAuthenticationFailed.Code, "Re-authentication must keep the principal", true)
		}
		sc.state = saslAuthenticated
		req.Conn.Principal = p
		req.Conn.SetAuthenticated(true)
		if req.RawSASL {
			req.Conn.SetRawSASL(false) // the client's next frame is a request
		}
		sc.expires = time.Time{}
		if ms := b.cfg.ConnectionsMaxReauthMs; ms > 0 && r.Version >= 1 {
			resp.SessionLifetimeMillis = ms
			sc.expires = time.Now().Add(time.Duration(ms) * time.Millisecond)
		}
		if sc.reauth {
			log.Debug("broker: SASL re-authenticated", "principal", p.String())
		} else {
			log.Info("broker: SASL authenticated", "principal", p.String())
		}
		sc.reauth = false
		resp.SASLAuthBytes = out.Token
		return reply(resp)
	case errors.Is(err, sdk.ErrUnavailable) || ctx.Err() != nil:
		return nil, fmt.Errorf("broker: SASL %s step: %w", sc.mechanism, err)
	case errors.As(err, &authErr) || errors.Is(err, sdk.ErrAuthenticationFailed):
		sc.state, sc.active = saslFailed, false
		msg := "Authentication failed"
		if authErr != nil && authErr.Message != "" {
			msg += ": " + authErr.Message
		}
		log.Info("broker: SASL authentication failed", "err", err)
		return fail(kerr.SaslAuthenticationFailed.Code, msg, true)
	default:
		sc.state = saslFailed // active stays: End is sent when the connection closes
		log.Warn("broker: SASL authenticator error", "err", err)
		return fail(kerr.SaslAuthenticationFailed.Code, "Authentication failed due to an internal error", true)
	}
}
