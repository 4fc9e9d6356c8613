// Package quota enforces Kafka's client quotas (KIP-13, KIP-55, KIP-124,
// KIP-219): byte-rate limits on what producers send and consumers
// receive, and a limit on the share of broker time a client's requests
// take, per user, per client id, or both, with defaults.
//
// # Quota kinds (Kafka's config names)
//
//	producer_byte_rate   bytes/s of produce requests
//	consumer_byte_rate   bytes/s of fetch responses to consumers
//	request_percentage   percent of one thread's time spent handling the
//	                     client's requests (100 = one whole thread)
//
// # Entities and precedence
//
// A quota is set on an entity: a user (the authenticated principal's
// name; ANONYMOUS on plaintext listeners), a client id, or both, where
// either may be the default for its type. For a request from user U with
// client id C the first of these that sets the quota kind wins, as in
// Kafka:
//
//	1 user=U         client-id=C
//	2 user=U         client-id=<default>
//	3 user=U
//	4 user=<default> client-id=C
//	5 user=<default> client-id=<default>
//	6 user=<default>
//	7                client-id=C
//	8                client-id=<default>
//
// The rate is measured per matched entity with its real names: a
// user-level quota is shared by all of that user's clients, and a
// <default> quota applies to each user (or client id) on its own, not to
// all of them together.
//
// # Measurement and throttling
//
// Each (kind, entity) has a sampled rate: quota.window.num windows of
// quota.window.size.seconds (11 × 1 s by default). While the measured
// rate is over the bound, a response carries
//
//	throttle = (rate - bound) / bound × measured window
//
// capped at the whole window span, and the broker stops reading the
// connection's next request for that long (KIP-219: the response goes out
// at once; the client also waits). Over a few windows this holds a client
// at its bound whatever its request sizes. With no quota configured at
// all, checking a request is one atomic load.
//
// # Metadata store layout
//
// Quotas live in the metadata store, so every broker of a cluster
// enforces the same ones; each broker watches the prefix:
//
//	/client-quotas/users/<u>                 {"producer_byte_rate":5e6}
//	/client-quotas/users/<u>/clients/<c>     ...
//	/client-quotas/clients/<c>               ...
//
// where a name is URL-query-escaped and "<default>" (which no escaped
// name can equal) stands for the default entity. A key's value is a JSON
// object of kind to value; a key with no kinds left is deleted.
//
// # Concurrency
//
// Manager.table is an immutable snapshot behind an atomic pointer,
// replaced whole on every change. Manager.mu guards the sensor map; each
// sensor has its own mutex. Lock order: Manager.mu, then a sensor's mu
// (Throttle releases Manager.mu before locking a sensor, so they never
// nest today).
package quota
