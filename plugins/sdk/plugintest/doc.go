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
// The tests assert behaviour, never timing: waits poll with generous
// deadlines, so a loaded CI machine makes them slower, not flaky.
package plugintest
