// Package console is Vltava's built-in web console, served by the daemon
// on the metrics listener under /ui/: the cluster (brokers, controller,
// metadata store), topics with their partitions, ISR, offsets, sizes and
// configs, a topic's records a page at a time, consumer groups with
// their members, lag per partition and lag over time, the plugins, and
// the client software that connects (the compatibility report).
//
// It is Go's html/template over assets embedded in the binary: no
// JavaScript build step, no CDN, it works offline. Every figure comes
// from daemon/inspect, which reads the cluster through the broker's own
// Kafka listener, so what the console shows is what the Kafka API
// reports. /api/clients serves the compatibility report as JSON for
// `vltava clients`.
//
// The console is off on a metrics listener bound to a non-loopback
// address unless authentication is configured (console.enable turns it
// off everywhere).
//
// Goroutines: Start runs one sampler that records every group's lag each
// SampleEvery for the charts; Close stops it and waits.
package console
