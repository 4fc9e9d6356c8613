// Package scram implements SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677) for the simple authenticator: the stored credential, its
// record in the metadata store, the server side of the exchange, and the
// check of a PLAIN password against the same credential.
//
// # Credentials in the metadata store
//
// One key per user and mechanism (the user name path-escaped, so a "/"
// in a name cannot reach another key):
//
//	/security/scram/<url.PathEscape(user)>/<SCRAM-SHA-256|SCRAM-SHA-512>
//
// The value is a JSON object; the byte strings are standard base64:
//
//	{"salt":"…","iterations":8192,"stored_key":"…","server_key":"…"}
//
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key") with
// SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations). Neither the
// password nor SaltedPassword is stored: the record lets the server check
// a proof, not recover the password. Iterations are bounded as Kafka
// bounds them (MinIterations..MaxIterations).
//
// # Nonces
//
// The server appends 32 random bytes (base64) to the client's nonce. The
// client-final message must carry the combined nonce exactly, as RFC 5802
// says — with one exception kept for compatibility: librdkafka before
// 2.6.1 (Debian's kcat 1.7 runs librdkafka 2.0) sends its own nonce
// followed by the full server nonce (which already begins with the client
// nonce), i.e. client nonce twice. Kafka up to 3.8 checked only that the
// client's nonce ends with the server nonce, so those clients worked; we
// accept exactly the two forms, combined and client+combined, and nothing
// else a suffix check would let through. Accepting the doubled form costs
// nothing: the proof is still computed over the messages as sent, and the
// server's random part must still be echoed in full, so a replayed or
// forged final message fails as before.
//
// # Unknown users
//
// A client naming an unknown user gets a server-first message with a salt
// derived from the user name and a per-process secret and Kafka's minimum
// iteration count, then fails at the proof like a wrong password, so the
// exchange does not tell which users exist.
package scram
