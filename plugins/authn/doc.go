// Package authn holds Vltava's built-in authenticator plugins, each in
// its own package and served by `vltavad plugin authenticator NAME`:
//
//   - simple (plugins/authn/simple): SASL PLAIN and SCRAM-SHA-256/512
//     against SCRAM credentials in the metadata store (plugins/authn/scram),
//     managed with AlterUserScramCredentials and `vltava user`.
//   - kerberos (plugins/authn/kerberos): SASL GSSAPI with a service keytab.
//   - ip (plugins/authn/ip): CIDR allow/deny rules applied when a
//     connection is accepted (sdk.ConnFilter).
//
// This package itself holds only the end-to-end tests: a real vltavad,
// real clients (franz-go, sarama, kcat), the plugin processes and, for
// kerberos, a real MIT KDC (kerberos/kdctest). Tests needing a missing
// program skip naming its Debian package: kcat, krb5-kdc,
// krb5-admin-server, krb5-user, libsasl2-modules-gssapi-mit.
package authn
