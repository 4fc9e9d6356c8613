// Command envauth is the CONTRIBUTING.md example: a complete authenticator
// plugin in 22 lines, admitting one user from the environment.
package main

import (
	"context"
	"crypto/subtle"
	"os"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// check admits the one user named in $DEMO_USER with the password in $DEMO_PASSWORD.
func check(ctx context.Context, user, password string) (sdk.Principal, error) {
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte(os.Getenv("DEMO_USER"))) == 1
	okPass := subtle.ConstantTimeCompare([]byte(password), []byte(os.Getenv("DEMO_PASSWORD"))) == 1
	if !okUser || !okPass {
		return sdk.Principal{}, &sdk.AuthenticationError{Message: "invalid user or password"}
	}
	return sdk.Principal{Type: sdk.PrincipalTypeUser, Name: user}, nil
}

func main() { serve.Authenticator(serve.Mechanisms(serve.Plain(check))) }
