package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"sync"
	"time"

	"github.com/vltava/vltava/daemon/inspect"
)

// With Options.Login set, every page asks for HTTP Basic credentials and
// reads the cluster as that principal through an inspector of its own,
// so the broker's authentication refuses a wrong password and its
// authorization hides what the principal may not describe: the console
// shows exactly what a Kafka client with those credentials would see.
//
// A logged-in principal's inspector is kept for sessionIdle after its
// last page, at most maxSessions of them; the password is kept only as a
// SHA-256 digest, to recognise the same credentials again.
const (
	sessionIdle = 10 * time.Minute
	maxSessions = 32
)

type session struct {
	digest   [32]byte
	in       *inspect.Inspector
	lastUsed time.Time
}

// sessions maps a user name to its logged-in inspector. Guarded by mu.
type sessions struct {
	mu sync.Mutex
	by map[string]*session
}

func (ss *sessions) get(user string, digest [32]byte, now time.Time) *inspect.Inspector {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.by[user]
	if s == nil || subtle.ConstantTimeCompare(s.digest[:], digest[:]) != 1 {
		return nil
	}
	s.lastUsed = now
	return s.in
}

func (ss *sessions) put(user string, digest [32]byte, in *inspect.Inspector, now time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.by == nil {
		ss.by = map[string]*session{}
	}
	if old := ss.by[user]; old != nil {
		old.in.Close()
	}
	for name, s := range ss.by {
		if now.Sub(s.lastUsed) > sessionIdle {
			s.in.Close()
			delete(ss.by, name)
		}
	}
	if len(ss.by) >= maxSessions {
		var oldest string
		for name, s := range ss.by {
			if oldest == "" || s.lastUsed.Before(ss.by[oldest].lastUsed) {
				oldest = name
			}
		}
		ss.by[oldest].in.Close()
		delete(ss.by, oldest)
	}
	ss.by[user] = &session{digest: digest, in: in, lastUsed: now}
}

func (ss *sessions) closeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for name, s := range ss.by {
		s.in.Close()
		delete(ss.by, name)
	}
}

// auth wraps a page: without Login it reads through the console's own
// inspector; with it, it asks for and checks credentials first.
func (c *Console) auth(page func(http.ResponseWriter, *http.Request, *inspect.Inspector)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.opts.Login == nil {
			page(w, r, c.opts.Inspector)
			return
		}
		user, password, ok := r.BasicAuth()
		if !ok || user == "" {
			challenge(w, "log in with your Kafka (SASL) user and password")
			return
		}
		digest := sha256.Sum256([]byte(password))
		now := time.Now()
		in := c.sessions.get(user, digest, now)
		if in == nil {
			ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
			var err error
			in, err = c.opts.Login(ctx, user, password)
			cancel()
			if err != nil {
				c.opts.Logger.Info("console: login refused", "user", user, "remote", r.RemoteAddr, "err", err)
				challenge(w, "the broker refused these credentials")
				return
			}
			c.sessions.put(user, digest, in, now)
		}
		page(w, r, in)
	}
}

func challenge(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Vltava", charset="UTF-8"`)
	http.Error(w, msg, http.StatusUnauthorized)
}
