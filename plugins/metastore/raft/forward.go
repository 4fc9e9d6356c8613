package raft

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// The forwarding protocol (see doc.go): a node that is not the leader
// sends writes, linearizable reads and keep-alives to the leader as
// HTTP/1.1 POSTs over a quorum-port connection tagged 'F', with gob
// bodies. Paths:
const (
	pathApply     = "/v1/apply"     // Cmd: an encoded log entry → Rev, Session
	pathGet       = "/v1/get"       // Key → Found, KV, Rev
	pathList      = "/v1/list"      // Prefix → KVs, Rev
	pathRevision  = "/v1/revision"  // → Rev
	pathKeepAlive = "/v1/keepalive" // Session → TTL
	pathJoin      = "/v1/join"      // NodeID, Addr: add a non-voter → nothing
)

// maxForwardBody bounds a forwarded request body.
const maxForwardBody = 64 << 20

type fwdRequest struct {
	Cmd     []byte
	Key     string
	Prefix  string
	Session sdk.SessionID
	NodeID  int32  // pathJoin: the non-voter's node ID
	Addr    string // pathJoin: its quorum address
}

type fwdReply struct {
	Code    uint8
	Msg     string
	Rev     int64
	Session sdk.SessionID
	TTL     time.Duration
	Found   bool
	KV      sdk.KeyValue
	KVs     []sdk.KeyValue
}

// Reply codes: how an error crosses the wire so errors.Is still matches.
const (
	codeOK uint8 = iota
	codeNotFound
	codeVersionMismatch
	codeSessionExpired
	codeInvalidArgument
	codeUnavailable
	codeRetry // the receiver is not the leader (or is closing): nothing was applied
	codeOther
)

var codeErrors = map[uint8]error{
	codeNotFound:        sdk.ErrNotFound,
	codeVersionMismatch: sdk.ErrVersionMismatch,
	codeSessionExpired:  sdk.ErrSessionExpired,
	codeInvalidArgument: sdk.ErrInvalidArgument,
	codeUnavailable:     sdk.ErrUnavailable,
	codeRetry:           errRetry,
}

func errCode(err error) (uint8, string) {
	if err == nil {
		return codeOK, ""
	}
	for code, sentinel := range codeErrors {
		if errors.Is(err, sentinel) {
			return code, err.Error()
		}
	}
	if errors.Is(err, sdk.ErrClosed) {
		return codeRetry, err.Error()
	}
	return codeOther, err.Error()
}

// remoteError is an error returned by the leader: its text, matching
// the sentinel its code named.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

func codeError(code uint8, msg string) error {
	if code == codeOK {
		return nil
	}
	return &remoteError{msg: "raft: leader: " + msg, kind: codeErrors[code]}
}

// serveForward is the leader side of the forwarding protocol.
func (s *Store) serveForward(w http.ResponseWriter, r *http.Request) {
	var req fwdRequest
	if err := gob.NewDecoder(http.MaxBytesReader(w, r.Body, maxForwardBody)).Decode(&req); err != nil {
		s.log.Warn("raft: bad forwarded request", "remote", r.RemoteAddr, "err", err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	reply := s.handleForward(r.Context(), r.URL.Path, &req)
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(reply); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Write(buf.Bytes())
}

func (s *Store) handleForward(ctx context.Context, path string, req *fwdRequest) *fwdReply {
	reply := &fwdReply{}
	var err error
	if !s.enter() {
		err = sdk.ErrClosed
	} else {
		defer s.exit()
		switch path {
		case pathApply:
			var c *command
			if c, err = decodeCommand(req.Cmd); err == nil {
				var res applyResult
				res, err = s.localPropose(c)
				reply.Rev, reply.Session = res.rev, res.session
			}
		case pathGet:
			err = s.leaderRead()
			if err == nil {
				reply.KV, reply.Found, reply.Rev = s.fsm.get(req.Key)
			}
		case pathList:
			err = s.leaderRead()
			if err == nil {
				reply.KVs, reply.Rev = s.fsm.list(req.Prefix)
			}
		case pathRevision:
			err = s.leaderRead()
			reply.Rev = s.fsm.revision()
		case pathKeepAlive:
			reply.TTL, err = s.localKeepAlive(req.Session)
		case pathJoin:
			err = s.addNonvoter(ctx, req.NodeID, req.Addr)
		default:
			err = fmt.Errorf("%w: unknown forwarding path %q", sdk.ErrInvalidArgument, path)
		}
	}
	reply.Code, reply.Msg = errCode(err)
	return reply
}

// errDial marks a failure to reach the leader at all: nothing was sent.
var errDial = errors.New("raft: dial leader")

func newForwardClient(d dialer, leaderWait time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			timeout := 5 * time.Second
			if dl, ok := ctx.Deadline(); ok {
				timeout = min(timeout, time.Until(dl))
			}
			c, err := d.dialTagged(addr, timeout, tagForward)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errDial, err)
			}
			return c, nil
		},
		// A reply has LeaderWait to start; the request's context bounds
		// the whole call (see forward).
		ResponseHeaderTimeout: leaderWait,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       time.Minute,
		DisableCompression:    true,
	}
	return &http.Client{Transport: tr}
}

// forward sends one request to the leader at addr. A failure that leaves
// the outcome known (nothing sent, or a read) is errRetry; a write whose
// reply was lost is sdk.ErrUnavailable.
func (s *Store) forward(ctx context.Context, addr, path string, req *fwdRequest) (*fwdReply, error) {
	parent := ctx
	var body bytes.Buffer
	if err := gob.NewEncoder(&body).Encode(req); err != nil {
		return nil, fmt.Errorf("raft: encode forwarded request: %w", err)
	}
	// Every forwarded call has a deadline: a leader whose packets are
	// silently dropped must not hold the caller for as long as TCP takes
	// to give up (the caller's session lease is shorter than that).
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.LeaderWait)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, &body)
	if err != nil {
		return nil, fmt.Errorf("raft: forward: %w", err)
	}
	resp, err := s.fwdClient.Do(hreq)
	if err != nil {
		if parent.Err() != nil {
			return nil, parent.Err()
		}
		if errors.Is(err, errDial) || path != pathApply {
			return nil, fmt.Errorf("%w: %w", errRetry, err)
		}
		return nil, fmt.Errorf("%w: raft: forwarded write to %s, outcome unknown: %w", sdk.ErrUnavailable, addr, err)
	}
	defer resp.Body.Close()
	var reply fwdReply
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("raft: leader %s answered %s", addr, resp.Status)
	}
	if err := gob.NewDecoder(resp.Body).Decode(&reply); err != nil {
		if path != pathApply {
			return nil, fmt.Errorf("%w: %w", errRetry, err)
		}
		return nil, fmt.Errorf("%w: raft: reply of forwarded write from %s lost: %w", sdk.ErrUnavailable, addr, err)
	}
	return &reply, codeError(reply.Code, reply.Msg)
}
