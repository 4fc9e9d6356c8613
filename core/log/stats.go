package log

// Segments returns how many segments the log has (the active one
// included). Monitoring reads it; it takes the log's read lock briefly.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}
