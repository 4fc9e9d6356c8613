package config

import "testing"

func TestRoles(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Roles
		ok   bool
	}{
		{"broker,controller", Roles{Broker: true, Controller: true}, true},
		{" controller , broker", Roles{Broker: true, Controller: true}, true},
		{"broker", Roles{Broker: true}, true},
		{"controller", Roles{Controller: true}, true},
		{"", Roles{}, false},
		{"broker,", Roles{}, false},
		{"voter", Roles{}, false},
	} {
		b := DefaultBroker()
		b.ProcessRoles = tc.in
		got, err := b.Roles()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Roles(%q) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err := b.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate with process.roles %q: %v", tc.in, err)
		}
	}
	if r, err := DefaultBroker().Roles(); err != nil || !r.Broker || !r.Controller {
		t.Errorf("default roles %+v, %v; want broker,controller", r, err)
	}
}
