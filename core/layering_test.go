// Package core_test checks the import rules that keep the layers apart:
// core/ never imports go-plugin or gRPC (a program embedding the broker
// hands in plain Go values), and plugins/sdk uses only the standard
// library, so a third-party plugin stays light.
package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists the packages pattern depends on, one "path standard" pair per
// line, using the go command itself so the rule sees what the build sees.
func deps(t *testing.T, pattern string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-test=false", "-f", "{{.ImportPath}} {{.Standard}}", pattern).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pattern, err, out)
	}
	m := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		m[path] = std == "true"
	}
	return m
}

func TestCoreImportsNoPluginTransport(t *testing.T) {
	forbidden := []string{"github.com/hashicorp/go-plugin", "google.golang.org/grpc", "google.golang.org/protobuf"}
	for path := range deps(t, "github.com/vltava/vltava/core/...") {
		for _, f := range forbidden {
			if path == f || strings.HasPrefix(path, f+"/") {
				t.Errorf("core/ depends on %s; plugins reach core only through plugins/sdk interfaces", path)
			}
		}
	}
}

func TestSDKUsesOnlyStandardLibrary(t *testing.T) {
	for path, std := range deps(t, "github.com/vltava/vltava/plugins/sdk") {
		if !std && path != "github.com/vltava/vltava/plugins/sdk" {
			t.Errorf("plugins/sdk depends on %s; it may import only the standard library", path)
		}
	}
}
