package kerberos

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Rules map a Kerberos principal to a short name, as Kafka's
// sasl.kerberos.principal.to.local.rules (and Hadoop's auth_to_local) do.
// The first rule that applies wins; a principal no rule applies to is
// refused. Supported forms:
//
//	DEFAULT
//	    the first component, when the realm is the default realm
//	    ("alice@REALM" and "alice/host@REALM" → "alice")
//	RULE:[n:format](regex)s/pattern/replacement/[g][L|U]
//	    applies to principals of n components; format builds a string
//	    from $0 (the realm) and $1..$n (the components); the rule applies
//	    when regex matches the whole string, which then goes through the
//	    sed-style substitution (every match with g), lowercased with /L or
//	    uppercased with /U. The (regex) and s/// parts are optional.
type Rules struct {
	defaultRealm string
	rules        []rule
}

type rule struct {
	isDefault bool
	n         int
	format    string
	match     *regexp.Regexp // nil: any
	from      *regexp.Regexp // nil: no substitution
	to        string
	global    bool
	lower     bool
	upper     bool
}

var ruleRE = regexp.MustCompile(`^RULE:\[(\d+):([^\]]*)\](?:\(([^)]*)\))?(?:s/([^/]*)/([^/]*)/(g)?)?/?([LU])?$`)

// ParseRules parses rules (nil or empty means DEFAULT). defaultRealm is
// the realm DEFAULT accepts.
func ParseRules(defaultRealm string, specs []string) (*Rules, error) {
	rs := &Rules{defaultRealm: defaultRealm}
	if len(specs) == 0 {
		specs = []string{"DEFAULT"}
	}
	for _, s := range specs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if s == "DEFAULT" {
			rs.rules = append(rs.rules, rule{isDefault: true})
			continue
		}
		m := ruleRE.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("kerberos: principal mapping rule %q: want DEFAULT or RULE:[n:format](regex)s/pattern/replacement/[g][/L|/U]", s)
		}
		n, _ := strconv.Atoi(m[1])
		r := rule{n: n, format: m[2], to: convertReplacement(m[5]), global: m[6] == "g", lower: m[7] == "L", upper: m[7] == "U"}
		var err error
		if m[3] != "" {
			if r.match, err = regexp.Compile("^(?:" + m[3] + ")$"); err != nil {
				return nil, fmt.Errorf("kerberos: rule %q: %v", s, err)
			}
		}
		if m[4] != "" {
			if r.from, err = regexp.Compile(m[4]); err != nil {
				return nil, fmt.Errorf("kerberos: rule %q: %v", s, err)
			}
		}
		rs.rules = append(rs.rules, r)
	}
	return rs, nil
}

// convertReplacement turns sed's \1 into Go's ${1}.
func convertReplacement(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
			b.WriteString("${" + s[i+1:i+2] + "}")
			i++
			continue
		}
		if s[i] == '$' {
			b.WriteString("$$")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ErrNoRule is returned for a principal no rule maps.
var ErrNoRule = errors.New("kerberos: no principal mapping rule applies")

// ShortName maps principal components and realm to a local name.
func (rs *Rules) ShortName(components []string, realm string) (string, error) {
	for _, r := range rs.rules {
		if r.isDefault {
			if realm == rs.defaultRealm && len(components) > 0 {
				return components[0], nil
			}
			continue
		}
		if len(components) != r.n {
			continue
		}
		s := expand(r.format, components, realm)
		if r.match != nil && !r.match.MatchString(s) {
			continue
		}
		if r.from != nil {
			if r.global {
				s = r.from.ReplaceAllString(s, r.to)
			} else if loc := r.from.FindStringSubmatchIndex(s); loc != nil {
				s = s[:loc[0]] + string(r.from.ExpandString(nil, r.to, s, loc)) + s[loc[1]:]
			}
		}
		switch {
		case r.lower:
			s = strings.ToLower(s)
		case r.upper:
			s = strings.ToUpper(s)
		}
		if s == "" || strings.ContainsAny(s, "/@") {
			return "", fmt.Errorf("kerberos: rule maps %s@%s to %q, not a simple name", strings.Join(components, "/"), realm, s)
		}
		return s, nil
	}
	return "", fmt.Errorf("%w to %s@%s", ErrNoRule, strings.Join(components, "/"), realm)
}

func expand(format string, components []string, realm string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] == '$' && i+1 < len(format) && format[i+1] >= '0' && format[i+1] <= '9' {
			j := i + 1
			for j < len(format) && format[j] >= '0' && format[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(format[i+1 : j])
			switch {
			case n == 0:
				b.WriteString(realm)
			case n <= len(components):
				b.WriteString(components[n-1])
			}
			i = j - 1
			continue
		}
		b.WriteByte(format[i])
	}
	return b.String()
}
