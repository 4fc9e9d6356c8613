package log

import (
	"errors"
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
