package acceptance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// kcatFormat prints one record as a header line with explicit lengths,
// then the key and value bytes, then a newline:
//
//	<partition> <offset> <timestamp> <keylen|-1> <valuelen|-1> <headers CSV>\n<key><value>\n
const kcatFormat = `%p %o %T %K %S %h\n%k%s\n`

// kcatProduce writes w with one `kcat -P` per partition, each with that
// partition's codec, reading "key:value" lines from stdin.
func kcatProduce(t *testing.T, kcat, addr string, w *workload) {
	ctx := testCtx(t, 3*time.Minute)
	w.lo = time.Now().UnixMilli()
	var wg sync.WaitGroup
	errs := make([]error, len(codecs))
	for p := range int32(len(codecs)) {
		wg.Go(func() { errs[p] = kcatProducePartition(ctx, kcat, addr, w, p) })
	}
	wg.Wait()
	w.hi = time.Now().UnixMilli()
	for p, err := range errs {
		if err != nil {
			t.Errorf("kcat produce partition %d (%s): %v", p, codecs[p], err)
		}
	}
}

func kcatProducePartition(ctx context.Context, kcat, addr string, w *workload, p int32) error {
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", addr, "-t", w.topic,
		"-p", strconv.Itoa(int(p)), "-z", codecs[p], "-K", ":",
		"-H", "codec="+codecs[p], "-X", "acks=all")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(in, 1<<20)
	for i := range w.perPart {
		bw.Write(w.key(p, i))
		bw.WriteByte(':')
		bw.Write(w.value(p, i))
		bw.WriteByte('\n')
	}
	werr := bw.Flush()
	in.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		return fmt.Errorf("kcat: %v (stdin: %v): %s", err, werr, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "ERROR") || strings.Contains(s, "failed") {
		return fmt.Errorf("kcat reported: %s", s)
	}
	return nil
}

// kcatConsume reads every partition of w's topic from the beginning to
// its end with one `kcat -C -e`.
func kcatConsume(t *testing.T, kcat, addr string, w *workload) map[int32][]got {
	ctx := testCtx(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", addr, "-t", w.topic,
		"-o", "beginning", "-e", "-q", "-f", kcatFormat)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	recs, perr := parseKcat(bufio.NewReaderSize(out, 1<<20))
	if perr != nil {
		io.Copy(io.Discard, out)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kcat consume %s: %v: %s", w.topic, err, stderr.String())
	}
	if perr != nil {
		t.Fatalf("kcat consume %s: parsing output: %v", w.topic, perr)
	}
	return recs
}

// parseKcat reads records printed with kcatFormat until EOF.
func parseKcat(r *bufio.Reader) (map[int32][]got, error) {
	out := map[int32][]got{}
	for n := 0; ; n++ {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("record %d: %v", n, err)
		}
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 6)
		if len(f) < 5 {
			return out, fmt.Errorf("record %d: header line %q", n, line)
		}
		var nums [5]int64
		for i := range nums {
			if nums[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
				return out, fmt.Errorf("record %d: header line %q: %v", n, line, err)
			}
		}
		g := got{partition: int32(nums[0]), offset: nums[1], ts: nums[2], nullKey: nums[3] < 0}
		body := make([]byte, max(nums[3], 0)+max(nums[4], 0)+1)
		if _, err := io.ReadFull(r, body); err != nil || body[len(body)-1] != '\n' {
			return out, fmt.Errorf("record %d (%q): body: %v", n, line, err)
		}
		g.key, g.value = body[:max(nums[3], 0)], body[max(nums[3], 0):len(body)-1]
		if g.nullKey {
			g.key = nil
		}
		if len(f) == 6 && f[5] != "" {
			for _, kv := range strings.Split(f[5], ",") {
				k, v, _ := strings.Cut(kv, "=")
				g.headers = append(g.headers, hdr{k, v})
			}
		}
		out[g.partition] = append(out[g.partition], g)
	}
}
