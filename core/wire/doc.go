// Package wire is the Kafka TCP server: it accepts connections, frames and
// decodes requests with franz-go's kmsg, hands them one at a time to a
// Handler, and writes the responses back in request order, sending file
// ranges (fetched record batches) with sendfile when it can.
//
// # Framing
//
// Every request and response is a size-prefixed frame. All integers are
// big-endian.
//
//	frame            = size:int32  payload:size bytes   (size excludes itself)
//
// Request payload = request header + request body (kmsg encodes the body).
// The header version follows from the API key and version:
//
//	request header v0 (ControlledShutdown v0 only)
//	  0  api_key        int16
//	  2  api_version    int16
//	  4  correlation_id int32
//	request header v1 (non-flexible request versions)
//	  8  client_id      nullable string: int16 length (-1 = null), bytes
//	request header v2 (flexible request versions, KIP-482)
//	     v1, then tagged fields:
//	     tag_count uvarint, then tag_count × (tag uvarint, size uvarint, size bytes)
//
// The client_id of header v2 is still a classic (int16-length) nullable
// string, not a compact one. Unknown header tags are skipped.
//
// Response payload = response header + response body:
//
//	response header v0 (non-flexible response versions, and ApiVersions always)
//	  0  correlation_id int32
//	response header v1 (flexible response versions)
//	  4  tagged fields: we write none, a single 0x00 byte
//
// ApiVersions responses always use header v0, so a client that sent a
// version the broker does not know can still parse the answer (KIP-511).
//
// # Limits
//
// A request frame whose size is larger than Config.MaxRequestBytes
// (socket.request.max.bytes), or too small to hold a request header (8
// bytes), is refused before any buffer is allocated: the server logs it
// and closes the connection.
//
// # Request memory pool
//
// Config.QueuedMaxRequestBytes (queued.max.request.bytes, default 256 MiB;
// Kafka's default is unlimited) bounds the request frames held by the
// whole server. After reading a frame's 4-byte size, the reader reserves
// from the pool the size of the buffer the frame will end in (its size,
// rounded up to a power of two from 64 KiB to 8 MiB, where buffers are
// recycled). The reservation is returned when the request has been
// handled and its response written, or when it is dropped because the
// connection closed. Produce payloads are recycled
// only at that point, once the handler (and with acks=all, the wait for
// the ISR) has returned, since record batches are stamped in place and
// appended from the request's buffer.
//
// While a frame does not fit, its reader waits before reading the body:
// the connection is not read, TCP pushes back on the client, nothing is
// refused, and reading resumes as soon as memory is returned. A frame the
// pool could never admit is refused with a log line and a close. On Linux
// a waiting reader checks every second, without reading, whether its peer
// has closed before sending the whole frame, and if so closes the
// connection, so peers that announce frames and leave do not hold
// connections (and places under max.connections) until memory frees; a
// frame that arrived whole before the peer closed is still served.
//
// A frame reserves for its whole announced size at once, as Kafka's pool
// does. Reserving only as bytes arrive would let readers that each hold
// part of a frame wait for one another forever (four 100 MiB frames
// arriving together into 256 MiB). What the reservation does not do is
// allocate: the payload buffer starts at most 64 KiB long and grows
// fourfold as bytes arrive (straight to the frame's size once that is at
// most eight times what arrived), so a peer that announces 100 MiB and sends
// 40 KiB costs 64 KiB of memory, and the payload memory in use is at
// most the bytes reserved (plus, briefly, the smaller buffer being copied
// out of, and what the garbage collector has not yet reclaimed).
//
// The pool keeps its last quarter (less if that would leave no room for a
// frame of MaxRequestBytes) for frames of at most 1 MiB: metadata,
// heartbeats, commits, fetch requests and ordinary produce requests.
// Clients that announce large frames and stall cannot hold the whole pool,
// so other clients keep being served. Small frames are admitted whenever
// they fit, ahead of waiting large ones; large frames are admitted in
// arrival order, so a stream of them cannot starve the first.
//
// A peer that stalls in the middle of a frame would keep its reservation
// until connections.max.idle.ms closes it (as in Kafka), so a few dozen
// such peers could hold the whole pool and stop every client for ten
// minutes. Config.StalledFrameTimeout (30 s, Kafka clients' default
// request.timeout.ms, after which the client has given up on the request
// anyway) bounds that: a frame whose body has not fully arrived that long
// after its memory was reserved is closed, with a log line, if other
// connections are waiting for request memory at that moment (checked
// again every second after the timeout). Without contention a slow frame
// is left alone. It has no Kafka config key. max.connections.per.ip
// bounds how many connections one address can use for this.
//
// # Connection limits
//
// Config.MaxConnections (max.connections) bounds the connections open at
// once; by default it is half of the open-file limit, at most 65,536
// (DefaultMaxConnections), so connections cannot take the descriptors
// that log segments need. Config.MaxConnectionsPerIP
// (max.connections.per.ip, unlimited by default as in Kafka) bounds them
// per remote IP address, with per-address exceptions in
// MaxConnectionsPerIPOverrides. A connection over a limit is accepted and
// closed at once; the open ones are unaffected. Refusals are logged at
// most once a second, with the number not logged, and counted in
// Stats.Refused. Unlike Kafka, which waits for a free slot before
// accepting when max.connections is reached and exempts the inter-broker
// listener, Vltava closes the new connection: replication fetches share
// the client listener, so a broker's limit must leave room for its peers.
//
// When accept itself fails (EMFILE or ENFILE: descriptors exhausted), Serve
// waits 5 ms, doubling to 1 s, before trying again, as net/http does, and
// logs once per burst of failures and once when accepting works again; the
// connections already open are served meanwhile.
//
// # Locks
//
// Server.mu guards the listener and connection sets and the connection
// counts of the limits. The request pool has its own mutex. They never
// nest: the pool is used only by connection goroutines, without
// Server.mu, and Server.mu is never held while waiting for the pool.
//
// # Decoding
//
// DecodeRequest parses one payload: the header with kbin, then the body via
// kmsg.RequestForKey, SetVersion and ReadFrom. An unknown API key, a version
// kmsg does not know, a malformed header or a body that fails to decode is an
// error, which closes the connection with a log line. The exception is
// ApiVersions (key 18) at a version newer than kmsg knows: it is delivered
// with Body == nil so the broker can answer UNSUPPORTED_VERSION in a v0
// response.
//
// # Connection model
//
// Each connection has two goroutines, both owned by the Server:
//
//   - the reader reads and decodes frames and passes them to the processor
//     through a channel of capacity one, so at most one request waits while
//     another is decoded and one is being handled (no unbounded buffering);
//   - the processor calls Handler.Handle for one request at a time and writes
//     its response before taking the next, so responses leave in request
//     order, as Kafka does.
//
// A Produce or Fetch that arrives while nothing is in flight is answered by
// the reader itself, which reads nothing meanwhile: order is kept, and the
// hand-off to the processor (a goroutine wake-up, often a thread wake-up,
// per request) is saved on the data path.
//
// Either goroutine closing the connection (read error, protocol error,
// handler error, write error, idle timeout) cancels the connection's context,
// which the Handler receives, so long polls end; Server.Close closes every
// connection and waits for every goroutine. A client that closes while the
// reader itself answers a produce or fetch is noticed when the response is
// written (after a fetch's max wait at the latest), as in Kafka, where a
// request parked in purgatory is not cancelled by its client leaving.
//
// A Response with CloseAfter set is written, then the connection closes
// (a failed SASL authentication). A Handler that implements ConnCloser is
// told when each connection has closed and its last Handle call returned,
// to release per-connection state.
//
// Config.IdleTimeout (connections.max.idle.ms) closes a connection that has
// had no request in progress and no request or response for that long; a
// request being handled (a long poll) keeps it open. Each response write
// also gets the timeout as its deadline, so a client that stops reading is
// closed as well.
//
// A response is written whole or not at all: its bytes and file ranges go
// out back to back, and any write error closes the connection, so a client
// never sees a partial response followed by another one.
//
// # Zero copy
//
// A Response can carry a Frame instead of a kmsg message: ordered runs of
// bytes and FileRanges. FetchFrame builds one for a FetchResponse whose
// record sets live in log segment files. On a TCP connection with
// Config.ZeroCopy set, each FileRange is sent with positioned sendfile(2)
// (the offset is passed explicitly, so the file's shared offset never moves
// and concurrent fetches of one file do not interfere); otherwise the range
// is read with pread and copied into the socket. TLS connections always
// copy: the bytes must pass through crypto/tls (no kernel TLS).
//
// # Listeners and TLS
//
// ServeListener serves a listener described by a ListenerConfig: its name
// and security protocol (copied into every ConnInfo), and optionally TLS.
// A TLS connection is counted against the connection limits at accept,
// then completes its handshake on its own goroutine within
// TLSHandshakeTimeout before any frame is read; a failed handshake (no or
// an untrusted client certificate when one is required, a plaintext
// client) is logged and closes the connection. A verified client
// certificate is mapped to ConnInfo.Principal by ListenerConfig.Principal.
// PreAuthMaxRequestBytes caps frames until the Handler calls
// ConnInfo.SetAuthenticated(true) (sasl.server.max.receive.size on SASL
// listeners), so an unauthenticated peer cannot make the server reserve
// socket.request.max.bytes.
//
// # Raw SASL tokens
//
// After a SaslHandshake v0 (KIP-43) a client sends its SASL tokens as
// bare frames: [int32 size][token], no request header; the server answers
// each with [int32 size][token] (possibly empty), no response header. The
// Handler announces this with ConnInfo.SetRawSASL(true) before answering
// the handshake; the reader then wraps each frame as a SaslAuthenticate v0
// request marked RawSASL, and the writer sends the answer's SASLAuthBytes
// bare, or, for an answer with an error code, nothing, closing the
// connection. The Handler clears the flag before answering the token that
// completes authentication. The client writes each frame only after
// reading the previous answer, so the reader always sees the flag the
// Handler set for it.
package wire
