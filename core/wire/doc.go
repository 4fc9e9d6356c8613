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
// A request frame whose size is larger than Config.MaxRequestBytes, or too
// small to hold a request header (8 bytes), is refused before any buffer is
// allocated: the server logs it and closes the connection. Large frames are
// read into a buffer that grows as bytes arrive, so a peer that announces a
// large size and then stalls does not pin that much memory.
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
// Either goroutine closing the connection (read error, protocol error,
// handler error, write error, idle timeout) cancels the connection's context,
// which the Handler receives, so long-poll fetches end; Server.Close closes
// every connection and waits for every goroutine.
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
// is read with pread and copied into the socket.
package wire
