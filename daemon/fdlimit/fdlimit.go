// Package fdlimit plans a broker's file descriptors: how many it needs
// for its partitions, listeners, plugins and connections, checked against
// RLIMIT_NOFILE at start (vltavad) and by `vltava doctor`.
package fdlimit

import (
	"fmt"
	"os"
	"regexp"

	"golang.org/x/sys/unix"

	"github.com/vltava/vltava/core/config"
)

// Descriptor planning. Descriptors are a budget, not a per-partition
// cost: the log keeps at most half of RLIMIT_NOFILE in segment files
// (core/log's budget closes the least recently used idle ones, active
// segments included, and they reopen on their next use), so the number of
// partitions does not raise the need. The other half serves listeners,
// plugin processes, the metadata store and connections. The Go runtime
// raises the soft limit to the hard one at start, so the hard limit is
// what the broker has.
const (
	fdsPerPlugin   = 8   // gRPC connection, stdio pipes, go-plugin's broker
	fdsConnections = 256 // the least room kept for client and replica connections
	fdsSpare       = 64  // store files, pprof, metrics, log files, the runtime's own
)

// partitionDir matches a partition directory name, <topic>-<partition>.
var partitionDir = regexp.MustCompile(`^[a-zA-Z0-9._-]+-[0-9]+$`)

// Partitions counts the partition directories in the broker's log dirs.
func Partitions(cfg config.Broker) int {
	parts := 0
	for _, dir := range config.SplitList(cfg.LogDirs) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // a new data directory: no partitions yet
		}
		for _, e := range ents {
			if e.IsDir() && partitionDir.MatchString(e.Name()) {
				parts++
			}
		}
	}
	return parts
}

// Need estimates the descriptors the broker needs, and says how: twice
// what listeners, plugins, a reserve of connections and spare take, the
// other half being the segment-file budget.
func Need(cfg config.Broker) (need int, how string) {
	listeners := len(config.SplitList(cfg.Listeners)) + 2 // + quorum, + metrics
	plugins := 1 + len(config.SplitList(cfg.GroupConsumerAssignors)) + len(config.SplitList(cfg.SaslAuthenticators))
	half := listeners + plugins*fdsPerPlugin + fdsConnections + fdsSpare
	need = 2 * half
	how = fmt.Sprintf("2 × (%d listeners + %d plugins × %d + %d for connections + %d spare): half for those, half for segment files of %d partitions, which close and reopen within it",
		listeners, plugins, fdsPerPlugin, fdsConnections, fdsSpare, Partitions(cfg))
	return need, how
}

// Check raises the soft descriptor limit to the hard one (the
// runtime normally has already) and refuses to start when even that is
// short of what the broker needs, with the numbers and the fix.
func Check(cfg config.Broker) (limit uint64, err error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, nil // nothing to check against
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	need, how := Need(cfg)
	if lim.Cur != unix.RLIM_INFINITY && lim.Cur < uint64(need) {
		return lim.Cur, fmt.Errorf("not enough file descriptors: the broker needs about %d (%s) but RLIMIT_NOFILE allows %d (hard limit %d); "+
			"raise it: `ulimit -n %d` in the shell that starts vltavad, or LimitNOFILE=%d in its systemd unit",
			need, how, lim.Cur, lim.Max, 2*need, 2*need)
	}
	return lim.Cur, nil
}
