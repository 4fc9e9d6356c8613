// Package buildinfo renders the version line vltavad and vltava print for
// --version, from the build information the Go linker records.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Line is "NAME MODULE-VERSION (commit REV[, modified]) GO-VERSION"
// from the build information the Go linker records.
func Line(name string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("%s %s %s (commit %s%s) %s", name, bi.Main.Path, v, rev, modified, bi.GoVersion)
}
