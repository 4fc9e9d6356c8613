package plugintest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
)

// AdmitCase is one connection for the ConnFilter contract tests.
type AdmitCase struct {
	ClientAddr   string // "host:port"
	ListenerName string
	Allowed      bool
	// Principal is the principal an admitted connection gets (zero: the
	// filter names none).
	Principal sdk.Principal
}

// ConnFilter runs the sdk.ConnFilter contract tests with cases, which
// must hold at least one admitted and one refused connection:
//   - every case is decided as it says, with its principal;
//   - a refusal gives a reason (the broker logs it) and no principal;
//   - decisions are the same when every case is asked concurrently.
func ConnFilter(t *testing.T, f sdk.ConnFilter, cases []AdmitCase) {
	t.Helper()
	var in, out bool
	for _, c := range cases {
		in, out = in || c.Allowed, out || !c.Allowed
	}
	if !in || !out {
		t.Fatalf("plugintest.ConnFilter needs at least one admitted and one refused case")
	}
	check := func(c AdmitCase) string {
		resp, err := f.Admit(t.Context(), &sdk.AdmitRequest{ClientAddr: c.ClientAddr, ListenerName: c.ListenerName})
		switch {
		case err != nil:
			return fmt.Sprintf("%s on %s: %v", c.ClientAddr, c.ListenerName, err)
		case resp.Allowed != c.Allowed:
			return fmt.Sprintf("%s on %s: allowed %v, want %v (%s)", c.ClientAddr, c.ListenerName, resp.Allowed, c.Allowed, resp.Reason)
		case !resp.Allowed && (resp.Reason == "" || resp.Principal != (sdk.Principal{})):
			return fmt.Sprintf("%s on %s: refused with reason %q and principal %v, want a reason and no principal", c.ClientAddr, c.ListenerName, resp.Reason, resp.Principal)
		case resp.Allowed && resp.Principal != c.Principal:
			return fmt.Sprintf("%s on %s: principal %v, want %v", c.ClientAddr, c.ListenerName, resp.Principal, c.Principal)
		}
		return ""
	}
	for _, c := range cases {
		if p := check(c); p != "" {
			t.Error(p)
		}
	}
	var wg sync.WaitGroup
	problems := make(chan string, 8*len(cases))
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range cases {
				if p := check(c); p != "" {
					problems <- "concurrent: " + p
				}
			}
		}()
	}
	wg.Wait()
	close(problems)
	for p := range problems {
		t.Error(p)
	}
}
