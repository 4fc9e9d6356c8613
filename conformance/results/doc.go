// Package results holds the published conformance reports, one per
// target: vltava.md (one node), vltava-3.md (the single-broker scenarios
// on three-broker clusters) and kfake.md. 'go generate
// ./conformance/results' regenerates all three with the vltava CLI; the
// reports record the target, its ApiVersions and capabilities, and every
// scenario's result.
package results

//go:generate go run github.com/vltava/vltava/tools/vltava conformance --target vltava --exit-zero --report vltava.md --title "Conformance: vltava, one node"
//go:generate go run github.com/vltava/vltava/tools/vltava conformance --target vltava --brokers 3 --exit-zero --report vltava-3.md --title "Conformance: vltava, three nodes"
//go:generate go run github.com/vltava/vltava/tools/vltava conformance --target kfake --exit-zero --report kfake.md --title "Conformance: kfake"
