package wire

import (
	"context"
	"crypto/tls"
	"time"
)

// handshake completes a TLS connection's handshake, bounded by
// TLSHandshakeTimeout and the server's shutdown, and sets the
// connection's TLS state and certificate principal. It reports whether
// the connection may be served; a refusal is logged. Plaintext
// connections pass at once.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, TLSHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if c.ctx.Err() == nil {
			c.log.Warn("wire: closing connection: TLS handshake failed", "err", err)
		}
		return false
	}
	st := tc.ConnectionState()
	c.info.TLS = &st
	if len(st.PeerCertificates) > 0 && c.lc.Principal != nil {
		p, err := c.lc.Principal(st.PeerCertificates[0])
		if err != nil {
			c.log.Warn("wire: closing connection: client certificate", "subject", st.PeerCertificates[0].Subject.String(), "err", err)
			return false
		}
		c.info.Principal = p
	}
	c.lastActive.Store(time.Now().UnixNano())
	return true
}

// preAuthMax is the listener's PreAuthMaxRequestBytes (0: no cap).
func (c *conn) preAuthMax() int32 {
	if c.lc == nil {
		return 0
	}
	return c.lc.PreAuthMaxRequestBytes
}
