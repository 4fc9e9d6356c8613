package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the lock file vltavad holds in each log directory while
// it runs, as Kafka's ".lock"; it holds the owner's PID for the message a
// second broker on the same directory prints.
const lockFileName = ".lock"

// dirLock is a held lock on a data directory.
type dirLock struct {
	f       *os.File
	created []string // directories created for the lock, deepest last
}

// lockDir creates dir if needed and takes an exclusive, non-blocking flock
// on dir/.lock. Another process holding it gives "data directory DIR in
// use by PID N". The lock lasts until release or the process exits.
func lockDir(dir string) (*dirLock, error) {
	created, err := mkdirAllTracked(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	l := &dirLock{created: created}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		l.removeCreated()
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			owner := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					owner = "PID " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("data directory %s in use by %s (lock file %s)", dir, owner, path)
		}
		return nil, fmt.Errorf("data directory %s: lock %s: %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	l.f = f
	return l, nil
}

// release unlocks; with fresh it also removes what lockDir created (a
// start that failed before writing anything leaves no directory behind).
func (l *dirLock) release(fresh bool) {
	if l == nil || l.f == nil {
		return
	}
	if fresh {
		os.Remove(l.f.Name())
		l.removeCreated()
	}
	l.f.Close()
	l.f = nil
}

func (l *dirLock) removeCreated() {
	for i := len(l.created) - 1; i >= 0; i-- {
		os.Remove(l.created[i]) // only if empty
	}
}

// mkdirAllTracked is os.MkdirAll that returns the directories it created,
// outermost first.
func mkdirAllTracked(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append([]string{d}, missing...)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return missing, nil
}
