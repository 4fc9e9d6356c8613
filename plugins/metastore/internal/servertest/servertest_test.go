package servertest

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortsOutsideEphemeralRange: the ports are distinct, bindable,
// and outside the kernel's ephemeral range, so no port-0 bind or
// outgoing connection (another test's) can take one before the server
// binds it.
func TestFreePortsOutsideEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange(t)
	seen := map[int]bool{}
	for _, p := range FreePorts(t, 20) {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p >= lo && p <= hi {
			t.Errorf("port %d is in the ephemeral range [%d, %d]", p, lo, hi)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not bindable: %v", p, err)
		}
		ln.Close()
	}
}

// ephemeralRange reads net.ipv4.ip_local_port_range.
func ephemeralRange(t *testing.T) (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range: ", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Skipf("ip_local_port_range: %q", b)
	}
	lo, _ = strconv.Atoi(f[0])
	hi, _ = strconv.Atoi(f[1])
	return lo, hi
}
