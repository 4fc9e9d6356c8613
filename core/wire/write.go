package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	// copyChunk is the most file data the copying path reads before it
	// writes.
	copyChunk = 256 << 10
	// keepBuf is the largest buffer a connection keeps between responses.
	keepBuf = 1 << 20
)

// writer writes whole responses to one connection. It is used by one
// goroutine at a time: the processor, or the reader answering a request
// itself (conn.inflight orders them).
type writer struct {
	conn  net.Conn
	tcp   *net.TCPConn // non-nil when file ranges go out with sendfile
	idle  time.Duration
	stats *counters

	hdr   []byte      // size, response header, and for Msg responses the body
	cbuf  []byte      // file data read by the copying path
	cused int         // bytes of cbuf queued in pend
	pend  net.Buffers // byte runs not yet written (one writev)
}

func newWriter(conn net.Conn, zeroCopy bool, idle time.Duration, stats *counters) *writer {
	w := &writer{conn: conn, idle: idle, stats: stats}
	if tc, ok := conn.(*net.TCPConn); ok && zeroCopy && canSendfile {
		w.tcp = tc
	}
	return w
}

// write sends one response: size, header (correlation id, and an empty tag
// section when flexibleHeader), then the body. Any error leaves the
// connection unusable; the caller closes it.
func (w *writer) write(corrID int32, flexibleHeader bool, resp *Response) error {
	if (resp.Msg == nil) == (resp.Frame == nil) {
		return errors.New("wire: response needs exactly one of Msg and Frame")
	}
	b := append(w.hdr[:0], 0, 0, 0, 0)
	b = kbin.AppendInt32(b, corrID)
	if flexibleHeader {
		b = append(b, 0) // no tagged fields
	}
	var size int64
	if resp.Msg != nil {
		b = resp.Msg.AppendTo(b)
		size = int64(len(b) - 4)
	} else {
		size = int64(len(b)-4) + resp.Frame.Len()
	}
	w.hdr = b
	if size > math.MaxInt32 {
		return fmt.Errorf("wire: response of %d bytes is too large", size)
	}
	binary.BigEndian.PutUint32(b, uint32(size))
	err := w.writeBody(b, resp.Frame)
	w.release()
	return err
}

// writeRaw writes b as a bare size-prefixed frame, without a response
// header (a raw SASL token, ConnInfo.SetRawSASL).
func (w *writer) writeRaw(b []byte) error {
	if len(b) > math.MaxInt32 {
		return fmt.Errorf("wire: raw frame of %d bytes is too large", len(b))
	}
	hdr := binary.BigEndian.AppendUint32(w.hdr[:0], uint32(len(b)))
	w.hdr = hdr
	w.pend = append(w.pend[:0], hdr, b)
	err := w.flush()
	w.release()
	return err
}

// writeBody writes hdr and the frame's runs. Byte runs are gathered and go
// out in one writev before each file range (sendfile path) or each full
// copy chunk (copy path).
func (w *writer) writeBody(hdr []byte, f *Frame) error {
	w.pend = append(w.pend[:0], hdr)
	if f != nil {
		for _, s := range f.segs {
			var err error
			switch {
			case s.file.File == nil:
				w.pend = append(w.pend, s.b)
			case w.tcp != nil:
				err = w.sendRange(s.file)
			default:
				err = w.copyRange(s.file)
			}
			if err != nil {
				return err
			}
		}
	}
	return w.flush()
}

// flush writes the pending byte runs.
func (w *writer) flush() error {
	if len(w.pend) == 0 {
		return nil
	}
	w.deadline()
	bufs := w.pend
	_, err := bufs.WriteTo(w.conn)
	clear(w.pend)
	w.pend = w.pend[:0]
	w.cused = 0
	if err != nil {
		return fmt.Errorf("wire: write: %w", err)
	}
	return nil
}

// sendRange flushes pending bytes, then sends r with sendfile.
func (w *writer) sendRange(r FileRange) error {
	if err := w.flush(); err != nil {
		return err
	}
	w.deadline()
	calls, sent, err := sendFile(w.tcp, r)
	w.stats.sendfileCalls.Add(calls)
	w.stats.sendfileBytes.Add(sent)
	return err
}

// copyRange reads r with pread into cbuf, queuing each piece behind the
// pending bytes and flushing when cbuf is full, so small ranges and the
// bytes around them share one writev.
func (w *writer) copyRange(r FileRange) error {
	if w.cbuf == nil {
		w.cbuf = make([]byte, copyChunk)
	}
	for done := int64(0); done < r.Len; {
		if w.cused == len(w.cbuf) {
			if err := w.flush(); err != nil { // resets cused
				return err
			}
		}
		n := int(min(int64(len(w.cbuf)-w.cused), r.Len-done))
		chunk := w.cbuf[w.cused : w.cused+n : w.cused+n]
		if err := readRange(FileRange{File: r.File, Pos: r.Pos + done, Len: int64(n)}, chunk); err != nil {
			return err
		}
		w.pend = append(w.pend, chunk)
		w.stats.copiedFileBytes.Add(int64(n))
		w.cused += n
		done += int64(n)
	}
	return nil
}

// deadline bounds the next write by the idle timeout: a client that stops
// reading is closed after the timeout, as one that stops sending is.
func (w *writer) deadline() {
	if w.idle > 0 {
		_ = w.conn.SetWriteDeadline(time.Now().Add(w.idle))
	}
}

// release drops a large header buffer so an idle connection holds little.
func (w *writer) release() {
	if cap(w.hdr) > keepBuf {
		w.hdr = nil
	}
}
