package wire

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/plugins/sdk"
)

// minHeaderBytes is the size of the smallest request header (v0: api key,
// api version, correlation id).
const minHeaderBytes = 8

// saslAuthenticateKey is SaslAuthenticate's API key, under which raw
// SASL tokens reach the Handler.
const saslAuthenticateKey = 36

// rawSASLRequest wraps a raw SASL token frame (ConnInfo.SetRawSASL).
func rawSASLRequest(payload []byte) *Request {
	body := kmsg.NewPtrSASLAuthenticateRequest()
	body.Version = 0
	body.SASLAuthBytes = payload
	return &Request{Key: saslAuthenticateKey, Version: 0, Body: body, RawSASL: true}
}

// apiVersionsKey is the API key of ApiVersions, whose newer-than-known
// versions are delivered with a nil Body and whose response header is
// always v0.
const apiVersionsKey = 18

// ErrMalformed marks a request that cannot be decoded: unknown API key,
// unknown version, bad header or body. Test with errors.Is.
var ErrMalformed = errors.New("wire: malformed request")

// Request is one decoded request.
type Request struct {
	Key, Version  int16
	CorrelationID int32
	ClientID      string
	// Body is the decoded body with its version set. It is nil only for an
	// ApiVersions request whose version is newer than kmsg knows.
	Body kmsg.Request
	// Conn describes the connection the request arrived on. It is shared by
	// all requests of the connection.
	Conn *ConnInfo
	// RawSASL marks a raw SASL token (see ConnInfo.SetRawSASL): the frame
	// had no request header; Key and Version are SaslAuthenticate v0's and
	// Body a SASLAuthenticateRequest holding the token.
	RawSASL bool
	// Parked is the time the handler spent waiting rather than working (a
	// fetch's long poll, an acks=all produce's wait for the ISR). Handlers
	// that wait add to it; the request-time quota does not count it.
	Parked time.Duration
	// Received is when the request's frame had been read off the socket;
	// the time until its handler starts is its queue time (Kafka's
	// RequestQueueTimeMs).
	Received time.Time

	// payload is the frame the request was decoded from; Body may alias
	// it. The connection recycles it once the handler returned, for the
	// API keys whose handlers keep no reference to it.
	payload []byte
	// reserved is what the frame holds of the request pool, returned once
	// the request has been handled (conn.done).
	reserved int64
}

// Size is the request's size on the wire: the frame after its length.
func (r *Request) Size() int { return len(r.payload) }

// ConnInfo describes a client connection.
type ConnInfo struct {
	ID       uint64 // unique per Server, starting at 1
	Remote   net.Addr
	Local    net.Addr
	Listener string // the listener's name (ListenerConfig.Name, Config.Listener for Serve)
	// Protocol is the listener's security protocol (PLAINTEXT, SSL,
	// SASL_PLAINTEXT, SASL_SSL).
	Protocol string
	// TLS is the connection's completed handshake; nil on plaintext
	// listeners.
	TLS *tls.ConnectionState
	// Principal is who the connection acts as: sdk.Anonymous until the
	// Handler authenticates it (SASL) and sets it. Only the Handler writes
	// it, from Handle, which runs for one request of a connection at a
	// time; the server itself never reads it after setup.
	Principal sdk.Principal

	// authenticated lifts ListenerConfig.PreAuthMaxRequestBytes; see
	// SetAuthenticated.
	authenticated atomic.Bool
	// rawSASL: the next frames are raw SASL tokens; see SetRawSASL.
	rawSASL atomic.Bool
}

// SetRawSASL tells the server whether the connection's next frames are
// raw SASL tokens rather than requests: after a SaslHandshake v0 (KIP-43)
// the client sends each token as a bare size-prefixed frame, without a
// request header, and reads the server's token the same way. While it is
// set, the server hands each frame to the Handler as a SaslAuthenticate
// v0 request with RawSASL set and the frame as SASLAuthBytes, and writes
// the answer's SASLAuthBytes as a bare size-prefixed frame; an answer
// with an error code writes nothing and closes the connection (a raw
// exchange has no way to carry one). The Handler sets it before
// answering the handshake and clears it before answering the token that
// completes authentication: the client sends its next frame only after
// reading that answer, so the reader sees the change in time.
func (c *ConnInfo) SetRawSASL(raw bool) { c.rawSASL.Store(raw) }

// SetAuthenticated tells the server that the connection has (true) or no
// longer has (false) an authenticated session, so frames before
// authentication are capped by ListenerConfig.PreAuthMaxRequestBytes.
// The Handler calls it; frames already read are not re-checked.
func (c *ConnInfo) SetAuthenticated(ok bool) { c.authenticated.Store(ok) }

// Authenticated reports what SetAuthenticated last set.
func (c *ConnInfo) Authenticated() bool { return c.authenticated.Load() }

// DecodeRequest decodes one request payload: the bytes of a frame after its
// 4-byte size. The returned Request has no Conn. Errors wrap ErrMalformed.
// The Body may alias payload.
func DecodeRequest(payload []byte) (*Request, error) {
	if len(payload) < minHeaderBytes {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a request header", ErrMalformed, len(payload))
	}
	b := kbin.Reader{Src: payload}
	req := &Request{Key: b.Int16(), Version: b.Int16(), CorrelationID: b.Int32()}
	body := kmsg.RequestForKey(req.Key)
	if body == nil {
		return req, fmt.Errorf("%w: unknown api key %d", ErrMalformed, req.Key)
	}
	if req.Version < 0 || req.Version > body.MaxVersion() {
		if req.Key == apiVersionsKey && req.Version > body.MaxVersion() {
			// KIP-511: read the client id, ignore the rest; the broker
			// answers UNSUPPORTED_VERSION in a v0 response.
			req.ClientID = readClientID(&b)
			if err := b.Complete(); err != nil {
				return req, fmt.Errorf("%w: api versions v%d header: %v", ErrMalformed, req.Version, err)
			}
			return req, nil
		}
		return req, fmt.Errorf("%w: api key %d version %d not supported (max %d)",
			ErrMalformed, req.Key, req.Version, body.MaxVersion())
	}
	body.SetVersion(req.Version)
	if headerVersion(req.Key, req.Version, body.IsFlexible()) >= 1 {
		req.ClientID = readClientID(&b)
	}
	if body.IsFlexible() {
		skipTags(&b)
	}
	if err := b.Complete(); err != nil {
		return req, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if err := body.ReadFrom(b.Src); err != nil {
		return req, fmt.Errorf("%w: body: %v", ErrMalformed, err)
	}
	req.Body = body
	return req, nil
}

// headerVersion returns the request header version of an API key and
// version: 0 for ControlledShutdown v0, 2 for flexible versions, else 1.
func headerVersion(key, version int16, flexible bool) int {
	switch {
	case key == 7 && version == 0:
		return 0
	case flexible:
		return 2
	default:
		return 1
	}
}

// readClientID reads the nullable (int16-length) client id; null reads as "".
func readClientID(b *kbin.Reader) string {
	if s := b.NullableString(); s != nil {
		return *s
	}
	return ""
}

// skipTags skips a tagged-field section (KIP-482).
func skipTags(b *kbin.Reader) {
	n := b.Uvarint()
	for i := uint32(0); i < n && b.Ok(); i++ {
		b.Uvarint() // tag
		size := b.Uvarint()
		if int64(size) > int64(len(b.Src)) {
			b.Span(-1) // marks the reader bad
			return
		}
		b.Span(int(size))
	}
}
