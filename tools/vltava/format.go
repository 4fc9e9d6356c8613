package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultFormat is consume's output format.
const defaultFormat = `%t/%p@%o: %k=%v`

// formatHelp documents the placeholders for the --format flag.
const formatHelp = `record format, one line per record: %t topic, %p partition, %o offset, ` +
	`%k key, %v value (a null key or value prints as null, an empty one as nothing), %h headers (k=v,...), %T timestamp (Unix ms), %% a percent sign; \t, \n and \\ escapes`

// recordFormat is a parsed --format string: literal text and placeholders.
type recordFormat []formatPart

type formatPart struct {
	lit  string
	verb byte // 0 for a literal
}

// parseFormat parses a --format string. Unknown placeholders are errors so
// a typo is caught before any record is read.
func parseFormat(s string) (recordFormat, error) {
	var f recordFormat
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f = append(f, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c != '%' && c != '\\') || i+1 == len(s) {
			if c == '%' {
				return nil, fmt.Errorf("format %q ends with a lone %%", s)
			}
			lit.WriteByte(c)
			continue
		}
		i++
		next := s[i]
		if c == '\\' {
			switch next {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				lit.WriteByte('\\')
				lit.WriteByte(next)
			}
			continue
		}
		switch next {
		case '%':
			lit.WriteByte('%')
		case 't', 'p', 'o', 'k', 'v', 'h', 'T':
			flush()
			f = append(f, formatPart{verb: next})
		default:
			return nil, fmt.Errorf("format %q: unknown placeholder %%%c", s, next)
		}
	}
	flush()
	return f, nil
}

// write prints r in the format followed by a newline.
func (f recordFormat) write(w io.Writer, r *kgo.Record) error {
	buf := make([]byte, 0, 64+len(r.Key)+len(r.Value))
	for _, p := range f {
		switch p.verb {
		case 0:
			buf = append(buf, p.lit...)
		case 't':
			buf = append(buf, r.Topic...)
		case 'p':
			buf = strconv.AppendInt(buf, int64(r.Partition), 10)
		case 'o':
			buf = strconv.AppendInt(buf, r.Offset, 10)
		case 'k':
			buf = appendNullable(buf, r.Key)
		case 'v':
			buf = appendNullable(buf, r.Value)
		case 'T':
			buf = strconv.AppendInt(buf, r.Timestamp.UnixMilli(), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, h.Key...)
				buf = append(buf, '=')
				buf = append(buf, h.Value...)
			}
		}
	}
	buf = append(buf, '\n')
	_, err := w.Write(buf)
	return err
}

// appendNullable appends b, or "null" when b is nil (Kafka's null key or
// value, which kafka-console-consumer also prints as null); an empty b
// appends nothing.
func appendNullable(buf, b []byte) []byte {
	if b == nil {
		return append(buf, "null"...)
	}
	return append(buf, b...)
}
