package sdk

// PrincipalTypeUser is the principal type Kafka uses for authenticated
// clients ("User:alice" in ACLs).
const PrincipalTypeUser = "User"

// Principal is who a request acts as. The broker attaches one to every
// connection after authentication and passes it to every ACL check.
// The zero Principal is not valid; unauthenticated connections carry
// Anonymous.
type Principal struct {
	Type string // PrincipalTypeUser unless a plugin defines its own type
	Name string
}

// Anonymous is the principal of a connection that did not authenticate
// (a PLAINTEXT or SSL listener without client authentication).
var Anonymous = Principal{Type: PrincipalTypeUser, Name: "ANONYMOUS"}

// String returns "Type:Name", the form Kafka ACLs use.
func (p Principal) String() string { return p.Type + ":" + p.Name }
