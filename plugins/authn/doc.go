// Package authn holds Vltava's built-in authenticator plugins, each in
// its own package and served by `vltavad plugin authenticator NAME`:
//
//   - simple (plugins/authn/simple): SASL PLAIN and SCRAM-SHA-256/512
//     against SCRAM credentials in the metadata store (plugins/authn/scram),
//     managed with AlterUserScramCredentials and `vltava user`.
//
// This package itself holds only the end-to-end tests: a real vltavad,
// real clients (franz-go, sarama, kcat) and the plugin processes.
package authn
