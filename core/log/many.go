package log

import (
	"errors"
	"fmt"
	"sync"
)

// ioWorkers is how many logs CloseAll works on at once: closing is mostly
// waiting for fsyncs, which overlap well even on few cores.
const ioWorkers = 16

// CloseAll closes logs concurrently (a broker's shutdown) and returns
// their errors joined; ErrClosed from an already closed log is ignored.
func CloseAll(logs []*Log) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan *Log)
	for range min(ioWorkers, len(logs)) {
		wg.Go(func() {
			for l := range next {
				if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, l := range logs {
		next <- l
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// OpenSpec names one log for OpenAll.
type OpenSpec struct {
	Dir    string
	Config Config
}

// OpenAll opens logs concurrently (a broker's start-up, a topic's
// creation): opening is mostly waiting for the file system. The logs are
// in the order of specs. On an error it closes the logs it opened and
// returns the error of the first spec that failed.
func OpenAll(specs []OpenSpec) ([]*Log, error) {
	logs := make([]*Log, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(ioWorkers, len(specs)) {
		wg.Go(func() {
			for i := range next {
				logs[i], errs[i] = Open(specs[i].Dir, specs[i].Config)
			}
		})
	}
	for i := range specs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, l := range logs {
				if l != nil {
					l.Close()
				}
			}
			return nil, fmt.Errorf("log: %s: %w", specs[i].Dir, err)
		}
	}
	return logs, nil
}
