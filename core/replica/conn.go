package replica

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Request versions: Fetch v12 is the newest that names topics (v13
// switched to topic IDs) and the first with LastFetchedEpoch and
// DivergingEpoch (KIP-320's follower side).
const fetchVersion = 12

// ConnConfig is the security and limits of the connections WireDialer
// opens (the inter-broker listener's: TLS, SASL, or neither).
type ConnConfig struct {
	ClientID string
	// TLS, when set, wraps the connection; an empty ServerName is taken
	// from the dialled host.
	TLS *tls.Config
	// SASL, when set, authenticates every new connection (SaslHandshake
	// v1 and SaslAuthenticate); a KIP-368 session lifetime is honoured by
	// opening a new connection before the session expires.
	SASL        sasl.Mechanism
	DialTimeout time.Duration // 10 s
	// RequestTimeout bounds a request beyond the fetch's own max wait
	// (30 s).
	RequestTimeout time.Duration
	// MaxResponseBytes refuses (and closes on) larger responses (100 MiB).
	MaxResponseBytes int32
}

// WireDialer returns a Dialer whose clients speak the Kafka protocol over
// one connection each, encoded and decoded with kmsg. Unlike a general
// client it keeps one response buffer per connection and reuses it: a
// replica fetcher reads megabytes per second of record batches, and a
// fresh buffer per response (what franz-go's kgo does) cost the follower
// an allocation, its zeroing and the garbage collection of every byte it
// replicates (BENCHMARKS.md, issue 15).
func WireDialer(cfg ConnConfig) Dialer {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = 100 << 20
	}
	return func(leader BrokerAddr) (FetchClient, error) {
		if _, _, err := net.SplitHostPort(leader.Addr); err != nil {
			return nil, fmt.Errorf("replica: broker %d address %q: %w", leader.ID, leader.Addr, err)
		}
		return &wireClient{
			cfg:  cfg,
			addr: leader.Addr,
			f:    kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		}, nil
	}
}

// wireClient is a FetchClient over one connection, dialled on first use
// and again after any error. Used by one goroutine at a time.
type wireClient struct {
	cfg  ConnConfig
	addr string
	f    *kmsg.RequestFormatter

	conn     net.Conn // nil: dial before the next request
	r        *bufio.Reader
	corr     int32
	versions map[int16]int16 // the broker's max version per API key
	expires  time.Time       // SASL session end (zero: none); redial before
	wbuf     []byte          // request encoding, reused
	rbuf     []byte          // response bodies, reused: a response is valid until the next call
}

// Fetch sends req at v12. The record batches of the answer alias the
// client's buffer: they are valid until the next call on the client.
func (c *wireClient) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp := new(kmsg.FetchResponse)
	if err := c.request(ctx, req, resp, time.Duration(req.MaxWaitMillis)*time.Millisecond); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *wireClient) OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp := new(kmsg.OffsetForLeaderEpochResponse)
	return resp, c.request(ctx, req, resp, 0)
}

func (c *wireClient) ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp := new(kmsg.ListOffsetsResponse)
	return resp, c.request(ctx, req, resp, 0)
}

func (c *wireClient) Close() { c.drop() }

// drop closes the connection; the next request dials again.
func (c *wireClient) drop() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.r, c.versions = nil, nil, nil
	}
}

// request sends req at the newest version both sides know (Fetch at
// exactly fetchVersion) and decodes the answer into resp, dialling (and
// authenticating) first when there is no connection or the SASL session
// would expire while the request waits. Any error closes the connection.
func (c *wireClient) request(ctx context.Context, req kmsg.Request, resp kmsg.Response, wait time.Duration) (err error) {
	if c.conn != nil && !c.expires.IsZero() && time.Now().Add(wait+time.Second).After(c.expires) {
		c.drop()
	}
	if c.conn == nil {
		if err := c.dial(ctx); err != nil {
			return err
		}
	}
	max, ok := c.versions[req.Key()]
	if !ok {
		c.drop()
		return fmt.Errorf("replica: broker at %s does not serve api key %d", c.addr, req.Key())
	}
	v := min(max, req.MaxVersion())
	if req.Key() == kmsg.Fetch.Int16() {
		if max < fetchVersion {
			c.drop()
			return fmt.Errorf("replica: source broker at %s serves Fetch up to v%d, need v%d", c.addr, max, fetchVersion)
		}
		v = fetchVersion
	}
	req.SetVersion(v)
	defer func() {
		if err != nil {
			c.drop()
		}
	}()
	return c.roundTrip(ctx, req, resp, wait)
}

// roundTrip writes req on the connection and reads its answer into resp.
// REQUIRES: c.conn != nil; the caller drops the connection on error.
func (c *wireClient) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response, wait time.Duration) (err error) {
	// A cancelled context ends a read parked on the leader's max wait by
	// moving the deadline into the past; once that may have happened the
	// connection is not reused (the caller drops it on the error).
	conn := c.conn
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() && err == nil {
			err = ctx.Err()
		}
	}()
	if err := c.conn.SetDeadline(time.Now().Add(wait + c.cfg.RequestTimeout)); err != nil {
		return fmt.Errorf("replica: %s: %w", c.addr, err)
	}
	c.corr++
	c.wbuf = c.f.AppendRequest(c.wbuf[:0], req, c.corr)
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return c.ioErr(ctx, err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return c.ioErr(ctx, err)
	}
	size, corr := int32(binary.BigEndian.Uint32(hdr[:4])), int32(binary.BigEndian.Uint32(hdr[4:]))
	if size < 4 || size > c.cfg.MaxResponseBytes {
		return fmt.Errorf("replica: %s: response of %d bytes (limit %d)", c.addr, size, c.cfg.MaxResponseBytes)
	}
	if corr != c.corr {
		return fmt.Errorf("replica: %s: response to request %d, expected %d", c.addr, corr, c.corr)
	}
	n := int(size) - 4
	if cap(c.rbuf) < n {
		c.rbuf = make([]byte, n)
	}
	body := c.rbuf[:n]
	if _, err := io.ReadFull(c.r, body); err != nil {
		return c.ioErr(ctx, err)
	}
	// Flexible responses carry header tags, except ApiVersions' (its
	// header is always v0 so that any client can read it).
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		b := kbinReader{src: body}
		kmsg.SkipTags(&b)
		if b.bad {
			return fmt.Errorf("replica: %s: truncated response header", c.addr)
		}
		body = b.src
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("replica: %s: decode api key %d v%d: %w", c.addr, req.Key(), req.GetVersion(), err)
	}
	return nil
}

// ioErr reports a read or write failure, as the context's error when the
// context ended it.
func (c *wireClient) ioErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("replica: %s: %w", c.addr, err)
}

// dial connects, wraps TLS, learns the broker's versions and
// authenticates. On error nothing stays open.
func (c *wireClient) dial(ctx context.Context) (err error) {
	d := net.Dialer{Timeout: c.cfg.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("replica: dial %s: %w", c.addr, err)
	}
	defer func() {
		if err != nil {
			conn.Close()
			c.conn, c.r, c.versions = nil, nil, nil
		}
	}()
	if c.cfg.TLS != nil {
		tc := c.cfg.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(c.addr)
		}
		t := tls.Client(conn, tc)
		hctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
		err := t.HandshakeContext(hctx)
		cancel()
		if err != nil {
			return fmt.Errorf("replica: TLS with %s: %w", c.addr, err)
		}
		conn = t
	}
	c.conn, c.r = conn, bufio.NewReaderSize(conn, 16<<10)
	c.expires = time.Time{}

	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "vltava-replica", "1"
	av.Version = 3
	avr := new(kmsg.ApiVersionsResponse)
	if err := c.roundTrip(ctx, av, avr, 0); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(avr.ErrorCode); err != nil {
		return fmt.Errorf("replica: ApiVersions from %s: %w", c.addr, err)
	}
	c.versions = make(map[int16]int16, len(avr.ApiKeys))
	for _, k := range avr.ApiKeys {
		c.versions[k.ApiKey] = k.MaxVersion
	}
	if c.cfg.SASL != nil {
		return c.authenticate(ctx)
	}
	return nil
}

// authenticate runs the SASL conversation (KIP-152: SaslHandshake v1,
// then SaslAuthenticate until the mechanism is done) and notes a KIP-368
// session lifetime.
// REQUIRES: c.conn, c.versions.
func (c *wireClient) authenticate(ctx context.Context) error {
	mech := c.cfg.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism, hs.Version = mech.Name(), 1
	hsr := new(kmsg.SASLHandshakeResponse)
	if err := c.roundTrip(ctx, hs, hsr, 0); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsr.ErrorCode); err != nil {
		return fmt.Errorf("replica: SASL %s with %s: %w (broker offers %v)", mech.Name(), c.addr, err, hsr.SupportedMechanisms)
	}
	sess, msg, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("replica: SASL %s with %s: %w", mech.Name(), c.addr, err)
	}
	authV := min(c.versions[kmsg.SASLAuthenticate.Int16()], 2)
	start := time.Now()
	var lifetime int64
	for done := false; !done || len(msg) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes, req.Version = msg, authV
		resp := new(kmsg.SASLAuthenticateResponse)
		start = time.Now()
		if err := c.roundTrip(ctx, req, resp, 0); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			detail := ""
			if resp.ErrorMessage != nil {
				detail = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("replica: SASL %s with %s: %w%s", mech.Name(), c.addr, err, detail)
		}
		lifetime, msg = resp.SessionLifetimeMillis, nil
		if !done {
			if done, msg, err = sess.Challenge(resp.SASLAuthBytes); err != nil {
				return fmt.Errorf("replica: SASL %s with %s: %w", mech.Name(), c.addr, err)
			}
		}
	}
	if lifetime > 0 {
		const maxLifetime = int64(365 * 24 * time.Hour / time.Millisecond)
		c.expires = start.Add(time.Duration(min(lifetime, maxLifetime)) * time.Millisecond * 9 / 10)
	}
	return nil
}

// kbinReader is the kmsg.TagReader SkipTags needs over a response header.
type kbinReader struct {
	src []byte
	bad bool
}

func (r *kbinReader) Ok() bool { return !r.bad }

func (r *kbinReader) Uvarint() uint32 {
	v, n := binary.Uvarint(r.src)
	if n <= 0 || v > 1<<31 {
		r.bad, r.src = true, nil
		return 0
	}
	r.src = r.src[n:]
	return uint32(v)
}

func (r *kbinReader) Span(n int) []byte {
	if n < 0 || n > len(r.src) {
		r.bad, r.src = true, nil
		return nil
	}
	s := r.src[:n]
	r.src = r.src[n:]
	return s
}
