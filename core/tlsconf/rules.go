package tlsconf

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Rules is a parsed ssl.principal.mapping.rules list.
type Rules struct{ rules []rule }

type rule struct {
	def         bool // DEFAULT: the subject as it is
	re          *regexp.Regexp
	replacement string
	fold        byte // 0, 'L' or 'U'
}

// ParseRules parses Kafka's ssl.principal.mapping.rules:
// comma- or newline-separated RULE:pattern/replacement/[LU] entries and
// DEFAULT. A backslash escapes a slash inside pattern or replacement.
// Empty means DEFAULT.
func ParseRules(s string) (Rules, error) {
	var rs Rules
	rest := s
	for {
		rest = strings.TrimLeft(rest, " \t\r\n,")
		if rest == "" {
			break
		}
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			rs.rules = append(rs.rules, rule{def: true})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			rest = rest[len("RULE:"):]
			pat, r, ok := untilSlash(rest)
			if !ok {
				return Rules{}, fmt.Errorf("tlsconf: ssl.principal.mapping.rules: %q: want RULE:pattern/replacement/[LU]", s)
			}
			repl, r, ok := untilSlash(r)
			if !ok {
				return Rules{}, fmt.Errorf("tlsconf: ssl.principal.mapping.rules: %q: want RULE:pattern/replacement/[LU]", s)
			}
			ru := rule{replacement: repl}
			if r != "" && (r[0] == 'L' || r[0] == 'U') {
				ru.fold, r = r[0], r[1:]
			}
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return Rules{}, fmt.Errorf("tlsconf: ssl.principal.mapping.rules: pattern %q: %w", pat, err)
			}
			ru.re = re
			rs.rules = append(rs.rules, ru)
			rest = r
		default:
			return Rules{}, fmt.Errorf("tlsconf: ssl.principal.mapping.rules: unexpected %q: want RULE:... or DEFAULT", rest)
		}
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" && rest[0] != ',' && rest[0] != '\n' && rest[0] != '\r' {
			return Rules{}, fmt.Errorf("tlsconf: ssl.principal.mapping.rules: unexpected %q after a rule", rest)
		}
	}
	if len(rs.rules) == 0 {
		rs.rules = []rule{{def: true}}
	}
	return rs, nil
}

// untilSlash splits s at its first unescaped '/', unescaping "\/".
func untilSlash(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

// ErrNoRule reports a subject that no rule maps.
var ErrNoRule = errors.New("tlsconf: no ssl.principal.mapping.rules rule matches the certificate subject")

// Map turns a certificate subject into a principal name.
func (rs Rules) Map(subject string) (string, error) {
	for _, r := range rs.rules {
		if r.def {
			return subject, nil
		}
		if !r.re.MatchString(subject) {
			continue
		}
		out := r.re.ReplaceAllString(subject, r.replacement)
		switch r.fold {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: %q", ErrNoRule, subject)
}

// PrincipalName maps a verified peer certificate to a principal name.
func (rs Rules) PrincipalName(c *x509.Certificate) (string, error) {
	return rs.Map(SubjectOf(c))
}
