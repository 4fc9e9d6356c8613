package target

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Environment variables of the external target.
const (
	EnvBootstrap = "VLTAVA_CONFORMANCE_BOOTSTRAP" // host:port[,host:port...]
	EnvKill      = "VLTAVA_CONFORMANCE_KILL_CMD"  // shell command; $BROKER is the node ID
	EnvStop      = "VLTAVA_CONFORMANCE_STOP_CMD"
	EnvCont      = "VLTAVA_CONFORMANCE_CONT_CMD"
	EnvRestart   = "VLTAVA_CONFORMANCE_RESTART_CMD"
	EnvCaps      = "VLTAVA_CONFORMANCE_CAPS" // extra capabilities, e.g. "replication,multibroker"
)

// External is a running cluster the suite does not manage. Broker faults
// run the hook commands (sh -c, with BROKER set to the node ID); without a
// hook the matching capability is missing.
type External struct {
	Seeds               []string
	KillCmd, StopCmd    string
	ContCmd, RestartCmd string
	Extra               Caps
}

// NewExternal reads the external target from env.
func NewExternal(env func(string) string) (*External, error) {
	seeds := strings.FieldsFunc(env(EnvBootstrap), func(r rune) bool { return r == ',' || r == ' ' })
	if len(seeds) == 0 {
		return nil, errors.New("target: external needs an explicit bootstrap (" + EnvBootstrap + " or -b); there is no default")
	}
	x := &External{Seeds: seeds, KillCmd: env(EnvKill), StopCmd: env(EnvStop),
		ContCmd: env(EnvCont), RestartCmd: env(EnvRestart), Extra: Caps{}}
	caps, err := ParseCaps(env(EnvCaps))
	if err != nil {
		return nil, err
	}
	x.Extra = caps
	return x, nil
}

// ParseCaps parses a comma-separated capability list (VLTAVA_CONFORMANCE_CAPS);
// an unknown name is an error that lists the known ones.
func ParseCaps(list string) (Caps, error) {
	c := Caps{}
	var bad []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !ValidCap(name) {
			bad = append(bad, name)
			continue
		}
		c[name] = true
	}
	if len(bad) > 0 {
		known := slices.Sorted(maps.Keys(KnownCaps()))
		return nil, fmt.Errorf("target: %s: unknown capabilities %s (known: %s)", EnvCaps, strings.Join(bad, ","), strings.Join(known, ","))
	}
	return c, nil
}

// Name implements Target.
func (*External) Name() string { return "external" }

// Software implements softwarer: the Kafka protocol does not say.
func (*External) Software() string {
	return "not reported by the Kafka protocol (ApiVersions names the client's software, not the broker's)"
}

// hooks names the fault hooks that are set.
func (x *External) hooks() []string {
	var hs []string
	for _, h := range []struct{ env, cmd string }{{EnvKill, x.KillCmd}, {EnvStop, x.StopCmd}, {EnvCont, x.ContCmd}, {EnvRestart, x.RestartCmd}} {
		if h.cmd != "" {
			hs = append(hs, h.env)
		}
	}
	return hs
}

// Facts implements Target: hooks give kill9/stop/restart; multibroker and
// replication must be declared in VLTAVA_CONFORMANCE_CAPS.
func (x *External) Facts() Caps {
	c := Caps{"kill9": x.KillCmd != "", "stop": x.StopCmd != "" && x.ContCmd != "",
		"restart": x.RestartCmd != "", "rawtcp": true, "faults": false, "brokerconfig": false, "sasl": false,
		"multibroker": false, "replication": false}
	for k, v := range x.Extra {
		c[k] = v
	}
	return c
}

// Start implements Target; it starts nothing and returns the cluster.
func (x *External) Start(_ context.Context, o Options) (Cluster, error) {
	if o.SASL || o.ACLs {
		return nil, fmt.Errorf("%w: the external target cannot start a SASL cluster", ErrUnsupported)
	}
	return x, nil
}

// Bootstrap implements Cluster.
func (x *External) Bootstrap() []string { return x.Seeds }

func (x *External) hook(cmd, what string, node int32) error {
	if cmd == "" {
		return fmt.Errorf("%w: no hook to %s a broker", ErrUnsupported, what)
	}
	c := exec.Command("sh", "-c", cmd)
	c.Env = append(c.Environ(), "BROKER="+strconv.Itoa(int(node)))
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("target: %s hook for broker %d: %v\n%s", what, node, err, out)
	}
	return nil
}

// Kill9 implements Cluster.
func (x *External) Kill9(n int32) error { return x.hook(x.KillCmd, "kill", n) }

// Stop implements Cluster.
func (x *External) Stop(n int32) error { return x.hook(x.StopCmd, "stop", n) }

// Cont implements Cluster.
func (x *External) Cont(n int32) error { return x.hook(x.ContCmd, "cont", n) }

// Restart implements Cluster.
func (x *External) Restart(n int32) error { return x.hook(x.RestartCmd, "restart", n) }

// Close implements Cluster; the cluster keeps running.
func (x *External) Close() error { return nil }
