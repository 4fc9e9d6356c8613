package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/vltava/vltava/daemon/daemontest"
)

// TestScripts runs testdata/*.txtar: each script gets its own vltavad
// (a real process, data in a temp dir), whose address is $BOOTSTRAP, and
// the command
//
//	vltava [<FILE] ARGS...
//
// which runs the CLI in this process against it (-b $BOOTSTRAP comes first,
// so a script's own -b wins), with FILE as its stdin. Its stdout and
// stderr are the script's, and stderr has the "vltava: ERROR" line main
// would print.
func TestScripts(t *testing.T) {
	bin := daemontest.Build(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			tb, ok := env.T().(testing.TB)
			if !ok {
				return errors.New("testscript: not a testing.TB")
			}
			p := daemontest.Start(tb, bin)
			env.Setenv("BOOTSTRAP", p.Addr())
			silent, err := startSilent()
			if err != nil {
				return err
			}
			env.Defer(silent.close)
			env.Setenv("SILENT", silent.ln.Addr().String())
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"vltava": cmdVltava,
		},
	})
}

// silentBroker accepts connections and never answers: a broker that hangs.
type silentBroker struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func startSilent() (*silentBroker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &silentBroker{ln: ln, done: make(chan struct{})}
	go func() { // stopped and waited for by close
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

func (s *silentBroker) close() {
	s.ln.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

func cmdVltava(ts *testscript.TestScript, neg bool, args []string) {
	var stdin string
	if len(args) > 0 && strings.HasPrefix(args[0], "<") {
		stdin = ts.ReadFile(args[0][1:])
		args = args[1:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errOut bytes.Buffer
	err := run(ctx, append([]string{"-b", ts.Getenv("BOOTSTRAP")}, args...), strings.NewReader(stdin), ts.Stdout(), &errOut)
	if err != nil && !errors.As(err, new(reported)) {
		fmt.Fprintln(&errOut, "vltava:", errorText(err))
	}
	ts.Stderr().Write(errOut.Bytes())
	switch {
	case err != nil && !neg:
		ts.Fatalf("vltava %s: %v", strings.Join(args, " "), err)
	case err == nil && neg:
		ts.Fatalf("vltava %s succeeded unexpectedly", strings.Join(args, " "))
	}
}
