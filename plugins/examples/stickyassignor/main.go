// Command stickyassignor is an example Vltava plugin: the sticky
// partition assignor of package sticky, served out of process. List the
// built binary among the assignors to load it; KIP-848 consumers then
// select it with group.remote.assignor=sticky:
//
//	group.consumer.assignors: uniform,range,/path/to/stickyassignor
package main

import (
	"github.com/vltava/vltava/plugins/examples/stickyassignor/sticky"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

func main() { serve.Assignor(sticky.Assignor{}) }
