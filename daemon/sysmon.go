package main

import (
	"os"
	"strings"
	"syscall"
)

// The Go runtime's sysmon thread sleeps deeply while every processor is
// idle, and the first system call after that wakes it with its shortest
// period (20 µs, doubling only after 1 ms). A broker under a steady trickle
// of small requests goes idle between them, so each request re-arms
// sysmon: measured on the replication path (BENCHMARKS.md, "Issue 15,
// session 5"), sysmon's sleeps were 51% of the brokers' context switches,
// and on a paravirtualised VM a switch is what costs. With schedtrace set,
// sysmon never sleeps deeply and backs off to 10 ms while there is nothing
// to retake; the period is so long (24.8 days) that no trace is printed in
// practice (one line per period after that on stderr), and a fatal error
// prints the scheduler's state before the stack traces.
//
// The runtime reads GODEBUG once, at start, so vltavad re-executes itself
// with the setting added. VLTAVA_GO_SYSMON=default keeps the runtime's
// behaviour; a GODEBUG that sets schedtrace already is left as it is.
const (
	sysmonSetting = "schedtrace=2147483647"
	sysmonOptOut  = "VLTAVA_GO_SYSMON"
)

// sysmonEnv returns environ with sysmonSetting added to GODEBUG, or nil
// when nothing is to change: the operator opted out, or GODEBUG sets
// schedtrace already (which includes a process this re-executed).
func sysmonEnv(environ []string) []string {
	godebug, at := "", -1
	for i, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case sysmonOptOut:
			if v == "default" {
				return nil
			}
		case "GODEBUG":
			godebug, at = v, i
		}
	}
	for _, s := range strings.Split(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(s), "schedtrace=") {
			return nil
		}
	}
	out := append([]string(nil), environ...)
	if at < 0 {
		return append(out, "GODEBUG="+sysmonSetting)
	}
	if godebug != "" {
		godebug += ","
	}
	out[at] = "GODEBUG=" + godebug + sysmonSetting
	return out
}

// reexecForSysmon replaces the process with itself under sysmonEnv, before
// anything else has started; it returns only when there is nothing to do
// or the exec failed (then the broker runs with the runtime's default).
func reexecForSysmon() {
	env := sysmonEnv(os.Environ())
	if env == nil {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env)
}
