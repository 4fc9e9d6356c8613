package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// locateVltavad finds the vltavad binary for cluster up: next to this
// vltava executable, then on PATH, then built with go build into one
// cached file (rebuilt incrementally each time, never copied per run) when
// the working directory is inside the Vltava module.
func locateVltavad() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "vltavad")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("vltavad"); err == nil {
		return p, nil
	}
	modDir, ok := vltavaModuleDir()
	if !ok {
		return "", errors.New("no vltavad next to vltava or on PATH, and the working directory is not inside the " +
			"Vltava repository to build one: pass --vltavad PATH, or build it with " +
			"go build -o ~/go/bin/vltavad ./daemon in the repository")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "vltava")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "vltavad")
	cmd := exec.Command("go", "build", "-o", bin, "./daemon")
	cmd.Dir = modDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no vltavad on PATH, and go build ./daemon in %s failed (pass --vltavad): %v\n%s", modDir, err, out)
	}
	return bin, nil
}

// vltavaModuleDir finds the root of the Vltava module above the working
// directory.
func vltavaModuleDir() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			return dir, strings.TrimSpace(first) == "module github.com/vltava/vltava"
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
