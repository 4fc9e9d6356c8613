package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

// payloads hands perf produce its record values. Random letters by default:
// a repeating pattern would compress 100:1 and inflate figures taken with
// --compression. Values are windows at random offsets of one random
// buffer, so no two neighbouring records share content and no value is
// allocated per record; records never modify them.
type payloads struct {
	buf  []byte   // random letters, several MiB longer than size
	size int      // value size for buf
	list [][]byte // from --payload-file: pick one at random
	rng  *rand.Rand
}

// randomSpan is how much random text beyond one value the buffer holds.
const randomSpan = 4 << 20

func newPayloads(size int, file, delim string) (*payloads, error) {
	p := &payloads{size: size, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--payload-file: %w", err)
		}
		delim = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\r`, "\r").Replace(delim)
		if delim == "" {
			return nil, usagef("--payload-delimiter must not be empty")
		}
		for _, v := range bytes.Split(data, []byte(delim)) {
			if len(v) > 0 {
				p.list = append(p.list, v)
			}
		}
		if len(p.list) == 0 {
			return nil, fmt.Errorf("--payload-file %s holds no payload", file)
		}
		return p, nil
	}
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	p.buf = make([]byte, size+randomSpan)
	for i := range p.buf {
		p.buf[i] = letters[p.rng.IntN(len(letters))]
	}
	return p, nil
}

// next returns the next record's value (called from one goroutine).
func (p *payloads) next() []byte {
	if p.list != nil {
		return p.list[p.rng.IntN(len(p.list))]
	}
	off := p.rng.IntN(randomSpan)
	return p.buf[off : off+p.size : off+p.size]
}
