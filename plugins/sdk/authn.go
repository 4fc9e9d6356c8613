package sdk

import "context"

// Authenticator verifies clients with SASL mechanisms (PLAIN, SCRAM,
// GSSAPI, OAUTHBEARER, or a plugin's own). The broker owns the Kafka
// framing (SaslHandshake, SaslAuthenticate); the Authenticator sees only
// mechanism names and opaque tokens.
//
// A conversation: the broker calls Start when a client picks a mechanism,
// then Step with each client token and sends each response token back,
// until Step reports Done (with the authenticated Principal) or fails.
//
// Threading: methods may be called concurrently for different sessions.
// Calls for one session are sequential: the broker never calls Step again
// before the previous Step returned.
//
// Errors: a rejected client is reported with an error matching
// ErrAuthenticationFailed (normally an *AuthenticationError, whose Message
// the broker sends to the client); the broker answers
// SASL_AUTHENTICATION_FAILED and closes the connection. Any other error
// (ErrUnavailable, ctx errors) is an internal failure: the client gets a
// generic error and no detail. ErrInvalidArgument from Start means the
// mechanism is not supported.
//
// Lifetime: a session ends when Step returns Done or an error, or when
// End is called. The broker calls End when a connection closes mid
// conversation; an implementation may also drop sessions left idle.
type Authenticator interface {
	// Mechanisms lists the SASL mechanism names offered on a listener,
	// in order of preference.
	Mechanisms(ctx context.Context, req *MechanismsRequest) (*MechanismsResponse, error)

	// Start begins a conversation with one client.
	Start(ctx context.Context, req *StartRequest) (*StartResponse, error)

	// Step consumes one client token and returns the next server token.
	Step(ctx context.Context, req *StepRequest) (*StepResponse, error)

	// End abandons a conversation (client gone). Ending an unknown or
	// finished session is not an error.
	End(ctx context.Context, req *EndRequest) (*EndResponse, error)
}

// MechanismsRequest asks which mechanisms a listener offers.
type MechanismsRequest struct {
	ListenerName string
}

// MechanismsResponse lists mechanism names ("PLAIN", "SCRAM-SHA-256").
type MechanismsResponse struct {
	Mechanisms []string
}

// StartRequest begins a conversation.
type StartRequest struct {
	Mechanism    string // as sent by the client in SaslHandshake
	ClientAddr   string // "host:port" of the client
	ListenerName string // the listener the client connected to
}

// StartResponse names the conversation.
type StartResponse struct {
	Session string // opaque handle passed to Step and End
}

// StepRequest carries one client token.
type StepRequest struct {
	Session string
	Token   []byte
}

// StepResponse carries the server's answer.
type StepResponse struct {
	Token     []byte    // sent to the client; may be empty
	Done      bool      // the client is authenticated
	Principal Principal // set when Done
}

// EndRequest abandons a conversation.
type EndRequest struct {
	Session string
}

// EndResponse is empty for now.
type EndResponse struct{}

// AuthenticationError rejects a client. Message is sent to the client, so
// it must not reveal secrets or whether a user exists.
type AuthenticationError struct {
	Message string
}

func (e *AuthenticationError) Error() string {
	if e.Message == "" {
		return ErrAuthenticationFailed.Error()
	}
	return ErrAuthenticationFailed.Error() + ": " + e.Message
}

// Is makes errors.Is(err, ErrAuthenticationFailed) true.
func (e *AuthenticationError) Is(target error) bool { return target == ErrAuthenticationFailed }

// SecurityPrefix is the part of the broker's metadata store that holds
// security data (SCRAM credentials under /security/scram/).
const SecurityPrefix = "/security/"

// StoreReader is implemented by an authenticator that reads the broker's
// metadata store — the simple authenticator looks up SCRAM credentials
// there. Before Configure, the plugin is handed a read-only view of the
// store's SecurityPrefix: Get, List and Watch under the prefix work,
// anything else fails with ErrInvalidArgument, and every call fails with
// ErrUnavailable while the broker's store is unreachable. The broker
// writes the data (AlterUserScramCredentials); the plugin only reads it,
// so a plugin process never holds a store connection of its own.
type StoreReader interface {
	UseStore(store MetadataStore)
}

// ConnFilter is implemented by an authenticator that decides on a
// connection by its address when the broker accepts it, before any byte
// of a request is read (the ip authenticator). A refused connection is
// closed at once and the broker logs Reason; an admitted one acts as
// Principal until SASL authentication (if the listener has it) replaces
// it. An error is an internal failure: the connection is closed, never
// admitted.
type ConnFilter interface {
	Admit(ctx context.Context, req *AdmitRequest) (*AdmitResponse, error)
}

// AdmitRequest names the connection being accepted.
type AdmitRequest struct {
	ClientAddr   string // "host:port"
	ListenerName string // the listener's security protocol name
}

// AdmitResponse is the decision. Principal's zero value leaves the
// connection's principal as it is (Anonymous).
type AdmitResponse struct {
	Allowed   bool
	Principal Principal
	Reason    string // why: logged by the broker, never sent to the client
}
