package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSysmonEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{"no GODEBUG", []string{"A=1"}, []string{"A=1", "GODEBUG=" + sysmonSetting}},
		{"empty GODEBUG", []string{"GODEBUG=", "A=1"}, []string{"GODEBUG=" + sysmonSetting, "A=1"}},
		{"other settings", []string{"GODEBUG=gctrace=1"}, []string{"GODEBUG=gctrace=1," + sysmonSetting}},
		{"already set (a re-executed process)", []string{"GODEBUG=" + sysmonSetting}, nil},
		{"operator's schedtrace", []string{"GODEBUG=gctrace=1, schedtrace=1000"}, nil},
		{"opted out", []string{sysmonOptOut + "=default", "GODEBUG=gctrace=1"}, nil},
		{"other opt-out value", []string{sysmonOptOut + "=quiet"}, []string{sysmonOptOut + "=quiet", "GODEBUG=" + sysmonSetting}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sysmonEnv(tc.in)); diff != "" {
				t.Errorf("sysmonEnv(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
