// Package plugintest holds contract tests that any implementation of a
// plugins/sdk interface, built-in or third-party, runs against itself:
//
//	func TestContract(t *testing.T) {
//		plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
//			s, err := mystore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// plugintest.Assignor(t, impl) and plugintest.Authenticator(t, impl,
// cases) work the same way; an authenticator's cases are conversations
// the test cannot invent (credentials it accepts and ones it rejects).
//
// The tests assert behaviour, never timing: waits poll with generous
// deadlines, so a loaded CI machine makes them slower, not flaky.
package plugintest
