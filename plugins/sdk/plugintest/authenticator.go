package plugintest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
)

// AuthCase is one client conversation for the Authenticator contract
// tests: the tokens a client sends and who it is.
type AuthCase struct {
	Name string
	// Mechanism is the SASL mechanism; "" means the first one Mechanisms
	// lists.
	Mechanism string
	// Tokens are the client's tokens, one per Step, in order.
	Tokens [][]byte
	// NewClient, when set, replaces Tokens for mechanisms whose client
	// tokens depend on the server's (SCRAM's nonces): it returns a fresh
	// client for one conversation, which is called with the server's
	// previous token (nil before the first step) and returns its next
	// token. Steps is then the number of client tokens.
	NewClient func() func(server []byte) []byte
	Steps     int
	// Principal is who the conversation authenticates as. Ignored when
	// Reject is set.
	Principal sdk.Principal
	// Reject marks wrong credentials: some Step must fail with an error
	// matching sdk.ErrAuthenticationFailed and none may report Done.
	Reject bool
}

// Authenticator runs the sdk.Authenticator contract tests with cases,
// which must hold at least one accepted and one rejected conversation:
//   - Mechanisms lists at least one mechanism, no empty or duplicate
//     names, and every case's mechanism;
//   - an unknown mechanism is refused by Start with sdk.ErrInvalidArgument;
//   - every case ends as it says: Done exactly at its last token with its
//     principal, or failed with sdk.ErrAuthenticationFailed (an
//     *sdk.AuthenticationError or an error wrapping the sentinel) and no
//     principal;
//   - Start hands out distinct sessions, and a finished, ended or unknown
//     session fails cleanly in Step (an error, no Done, no principal);
//     End of an unknown or finished session is not an error;
//   - sessions are independent: all cases interleaved step by step, and
//     run concurrently, end exactly as they do alone.
func Authenticator(t *testing.T, a sdk.Authenticator, cases []AuthCase) {
	t.Helper()
	accepted := slices.ContainsFunc(cases, func(c AuthCase) bool { return !c.Reject })
	rejected := slices.ContainsFunc(cases, func(c AuthCase) bool { return c.Reject })
	if !accepted || !rejected {
		t.Fatalf("plugintest.Authenticator needs at least one accepted and one rejected case")
	}
	mechs := checkMechanisms(t, a, cases)
	for i := range cases {
		if cases[i].Mechanism == "" {
			cases[i].Mechanism = mechs[0]
		}
	}
	t.Run("unknown-mechanism", func(t *testing.T) {
		_, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: "PLUGINTEST-NO-SUCH-MECHANISM"})
		if !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("Start with an unknown mechanism: err = %v, want sdk.ErrInvalidArgument", err)
		}
	})
	for _, c := range cases {
		t.Run("case/"+c.Name, func(t *testing.T) {
			session := start(t, a, c)
			ps, _ := converse(t, a, c, newClient(c, session), 0, c.steps())
			for _, p := range ps {
				t.Error(p)
			}
			checkDead(t, a, session, "after the conversation ended")
			if _, err := a.End(t.Context(), &sdk.EndRequest{Session: session}); err != nil {
				t.Errorf("End of a finished session: %v", err)
			}
		})
	}
	t.Run("end-releases", func(t *testing.T) {
		c := firstAccepted(cases)
		session := start(t, a, c)
		if _, err := a.End(t.Context(), &sdk.EndRequest{Session: session}); err != nil {
			t.Fatalf("End: %v", err)
		}
		checkDead(t, a, session, "after End")
		if _, err := a.End(t.Context(), &sdk.EndRequest{Session: session}); err != nil {
			t.Errorf("End twice: %v", err)
		}
	})
	t.Run("unknown-session", func(t *testing.T) {
		checkDead(t, a, "plugintest-no-such-session", "for a session never started")
		if _, err := a.End(t.Context(), &sdk.EndRequest{Session: "plugintest-no-such-session"}); err != nil {
			t.Errorf("End of an unknown session: %v", err)
		}
	})
	t.Run("interleaved", func(t *testing.T) { interleaved(t, a, cases) })
	t.Run("concurrent", func(t *testing.T) { concurrent(t, a, cases) })
}

func checkMechanisms(t *testing.T, a sdk.Authenticator, cases []AuthCase) []string {
	t.Helper()
	resp, err := a.Mechanisms(t.Context(), &sdk.MechanismsRequest{})
	if err != nil {
		t.Fatalf("Mechanisms: %v", err)
	}
	if resp == nil || len(resp.Mechanisms) == 0 {
		t.Fatalf("Mechanisms lists no mechanism")
	}
	seen := make(map[string]bool)
	for _, m := range resp.Mechanisms {
		if m == "" || seen[m] {
			t.Errorf("Mechanisms %q: empty or duplicate name %q", resp.Mechanisms, m)
		}
		seen[m] = true
	}
	for _, c := range cases {
		if c.Mechanism != "" && !seen[c.Mechanism] {
			t.Errorf("case %s: mechanism %q not among Mechanisms %q", c.Name, c.Mechanism, resp.Mechanisms)
		}
	}
	return resp.Mechanisms
}

// client is one conversation's client side.
type client struct {
	session string
	fn      func(server []byte) []byte // NewClient's, nil for Tokens
	last    []byte                     // the server's last token
}

func newClient(c AuthCase, session string) *client {
	cl := &client{session: session}
	if c.NewClient != nil {
		cl.fn = c.NewClient()
	}
	return cl
}

func (cl *client) next(c AuthCase, i int) []byte {
	if cl.fn != nil {
		return cl.fn(cl.last)
	}
	return c.Tokens[i]
}

func (c AuthCase) steps() int {
	if c.NewClient != nil {
		return c.Steps
	}
	return len(c.Tokens)
}

func firstAccepted(cases []AuthCase) AuthCase {
	i := slices.IndexFunc(cases, func(c AuthCase) bool { return !c.Reject })
	return cases[i]
}

func start(t *testing.T, a sdk.Authenticator, c AuthCase) string {
	t.Helper()
	resp, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: c.Mechanism, ClientAddr: "127.0.0.1:1", ListenerName: "plugintest"})
	if err != nil {
		t.Fatalf("case %s: Start: %v", c.Name, err)
	}
	return resp.Session
}

// converse sends c's tokens [from, to) on session and returns the
// contract violations and whether the conversation ended (Done, an
// error, or a violation); it stops there.
func converse(t *testing.T, a sdk.Authenticator, c AuthCase, cl *client, from, to int) (problems []string, ended bool) {
	session := cl.session
	for i := from; i < to; i++ {
		last := i == c.steps()-1
		resp, err := a.Step(t.Context(), &sdk.StepRequest{Session: session, Token: cl.next(c, i)})
		if err == nil && resp != nil {
			cl.last = resp.Token
		}
		switch {
		case c.Reject && err != nil:
			if !errors.Is(err, sdk.ErrAuthenticationFailed) {
				problems = append(problems, fmt.Sprintf("case %s: step %d: err = %v, want sdk.ErrAuthenticationFailed", c.Name, i, err))
			}
			if resp != nil && (resp.Done || resp.Principal != (sdk.Principal{})) {
				problems = append(problems, fmt.Sprintf("case %s: step %d failed but returned %+v", c.Name, i, resp))
			}
			return problems, true
		case err != nil:
			return append(problems, fmt.Sprintf("case %s: step %d: %v", c.Name, i, err)), true
		case resp == nil:
			return append(problems, fmt.Sprintf("case %s: step %d: nil response", c.Name, i)), true
		case c.Reject && resp.Done:
			return append(problems, fmt.Sprintf("case %s: wrong credentials authenticated as %v", c.Name, resp.Principal)), true
		case c.Reject && last:
			return append(problems, fmt.Sprintf("case %s: wrong credentials: no step failed", c.Name)), true
		case resp.Done && !last:
			return append(problems, fmt.Sprintf("case %s: Done at step %d of %d", c.Name, i, c.steps())), true
		case !c.Reject && last && !resp.Done:
			return append(problems, fmt.Sprintf("case %s: not Done after the last token", c.Name)), true
		case resp.Done && (resp.Principal != c.Principal || resp.Principal.Name == ""):
			return append(problems, fmt.Sprintf("case %s: principal %v, want %v", c.Name, resp.Principal, c.Principal)), true
		case resp.Done:
			return nil, true
		}
	}
	return nil, false
}

// checkDead asserts that Step on session fails cleanly.
func checkDead(t *testing.T, a sdk.Authenticator, session, when string) {
	t.Helper()
	resp, err := a.Step(t.Context(), &sdk.StepRequest{Session: session, Token: []byte("plugintest")})
	if err == nil {
		t.Errorf("Step %s succeeded: %+v", when, resp)
	} else if resp != nil && (resp.Done || resp.Principal != (sdk.Principal{})) {
		t.Errorf("Step %s failed (%v) but returned %+v", when, err, resp)
	}
}

// interleaved starts every case, twice, then sends the tokens round by
// round across all the sessions.
func interleaved(t *testing.T, a sdk.Authenticator, cases []AuthCase) {
	all := append(slices.Clone(cases), cases...)
	clients := make([]*client, len(all))
	seen := make(map[string]bool)
	for i, c := range all {
		session := start(t, a, c)
		if seen[session] {
			t.Fatalf("Start handed out session %q twice", session)
		}
		seen[session] = true
		clients[i] = newClient(c, session)
	}
	done := make([]bool, len(all))
	for round := 0; ; round++ {
		more := false
		for i, c := range all {
			if done[i] || round >= c.steps() {
				continue
			}
			more = true
			ps, ended := converse(t, a, c, clients[i], round, round+1)
			for _, p := range ps {
				t.Error(p)
			}
			done[i] = ended
		}
		if !more {
			return
		}
	}
}

// concurrent runs every case from several goroutines at once.
func concurrent(t *testing.T, a sdk.Authenticator, cases []AuthCase) {
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cases {
				c := cases[(w+i)%len(cases)]
				resp, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: c.Mechanism})
				var ps []string
				if err != nil {
					ps = []string{fmt.Sprintf("case %s: Start: %v", c.Name, err)}
				} else {
					ps, _ = converse(t, a, c, newClient(c, resp.Session), 0, c.steps())
				}
				mu.Lock()
				problems = append(problems, ps...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
}
