// Command tokenauth is an example Vltava plugin: a SASL PLAIN
// authenticator whose passwords are tokens listed in the plugin's config
// (package tokens). Load it with a broker config like
//
//	listeners: SASL_PLAINTEXT://127.0.0.1:9092
//	sasl.authenticators: /path/to/tokenauth
//	sasl.authenticator.config:
//	  /path/to/tokenauth:
//	    tokens: {alice: s3cret}
package main

import (
	"github.com/vltava/vltava/plugins/examples/tokenauth/tokens"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

func main() { serve.Authenticator(tokens.Unconfigured()) }
