// Command cmd is the test plugin as its own executable:
// `cmd plugin <kind> <name>`.
package main

import (
	"fmt"
	"os"

	"github.com/vltava/vltava/plugins/host/internal/testplugin"
)

func main() {
	if !testplugin.Main(os.Args[1:]) {
		fmt.Fprintln(os.Stderr, "usage: cmd plugin <kind> <name>")
		os.Exit(2)
	}
}
