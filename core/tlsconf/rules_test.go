package tlsconf

import "testing"

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		rules, subject, want string
		bad, noMatch         bool
	}{
		{rules: "", subject: "CN=alice,O=Example", want: "CN=alice,O=Example"},
		{rules: "DEFAULT", subject: "CN=alice,O=Example", want: "CN=alice,O=Example"},
		{rules: `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, subject: "CN=kafka1,OU=ServiceUsers,O=Example", want: "kafka1"},
		{rules: `RULE:^CN=([^,]*)(,.*)?$/$1/,DEFAULT`, subject: "CN=alice,O=Example", want: "alice"},
		{rules: `RULE:^CN=([^,]*)(,.*)?$/$1/,DEFAULT`, subject: "CN=alice", want: "alice"},
		{rules: `RULE:^CN=([^,]*)(,.*)?$/$1/,DEFAULT`, subject: "O=Example", want: "O=Example"},
		{rules: `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, subject: "CN=alice,OU=eng,O=Example", want: "CN=alice,OU=eng,O=Example"},
		{rules: `RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/${1}@${2}/L`, subject: "CN=Bob,OU=Sales,O=Example", want: "bob@sales"},
		{rules: `RULE:^CN=(.*?),OU=(.*?)$/$1/U`, subject: "CN=bob,OU=x", want: "BOB"},
		{rules: "RULE:^CN=([^,]*).*$/$1/\n RULE:^O=(.*)$/o-$1/", subject: "O=acme", want: "o-acme"},
		{rules: `RULE:^CN=(.*)\/x$/$1/`, subject: "CN=a/x", want: "a"},
		{rules: `RULE:^CN=(.*)$/$1/`, subject: "O=acme", noMatch: true},
		{rules: `RULE:^CN=(.*$/$1/`, bad: true},
		{rules: `RULE:abc`, bad: true},
		{rules: `NOPE`, bad: true},
		{rules: `DEFAULT junk`, bad: true},
	} {
		rs, err := ParseRules(tc.rules)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed, want an error", tc.rules)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		got, err := rs.Map(tc.subject)
		if tc.noMatch {
			if err == nil {
				t.Errorf("%q on %q: got %q, want no match", tc.rules, tc.subject, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q on %q: got %q, %v, want %q", tc.rules, tc.subject, got, err, tc.want)
		}
	}
}
