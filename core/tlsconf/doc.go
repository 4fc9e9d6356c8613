// Package tlsconf builds the crypto/tls configurations of a broker from
// its Kafka-named ssl.* keys, and maps client certificates to principals.
//
// # Keystores and truststores
//
// Only PEM is supported (Kafka's ssl.keystore.type=PEM): ssl.keystore.location
// names a file holding the certificate chain (leaf first) and the private
// key (PKCS#8, PKCS#1 or SEC 1, unencrypted, or in a legacy
// "Proc-Type: 4,ENCRYPTED" block opened with ssl.key.password; PKCS#8
// "ENCRYPTED PRIVATE KEY" blocks are refused with a message saying so).
// ssl.keystore.certificate.chain and ssl.keystore.key give the same inline.
// ssl.truststore.location (or ssl.truststore.certificates) holds the CA
// certificates peers are checked against; without it, a client side uses
// the system roots and a server side cannot check client certificates.
//
// # Client certificates
//
// ssl.client.auth, on SSL listeners (SASL_SSL listeners ask for no
// certificate, as Kafka does without KIP-684's listener-prefixed key), is
// none (no certificate asked for), requested (asked
// for; a client without one is served as User:ANONYMOUS, one with an
// untrusted one is refused in the handshake) or required (refused without
// a trusted one). A verified client certificate names the principal: its
// subject in RFC 2253 form ("CN=alice,OU=eng,O=Example"), rewritten by
// ssl.principal.mapping.rules, Kafka's syntax:
//
//	RULE:pattern/replacement/[LU], ..., DEFAULT
//
// The first rule whose pattern matches the whole subject gives the name
// (the regexp's replacement, $1 for a group; L or U lower- or upper-cases
// it); DEFAULT keeps the subject as it is. Patterns are Go regexps (RE2),
// which covers Kafka's usual rules. A subject no rule matches is refused.
//
// # Between brokers
//
// Brokers dial each other (replica fetchers) and the raft quorum's nodes
// dial each other with ClientConfig: the broker's own keystore as the
// client certificate, its truststore as the roots, and host-name
// verification unless ssl.endpoint.identification.algorithm is empty.
package tlsconf
