package quota

import (
	"fmt"
	"net/url"
	"strings"
)

// Kind is a quota type, named as Kafka names it.
type Kind string

// The quota kinds.
const (
	ProducerByteRate  Kind = "producer_byte_rate"
	ConsumerByteRate  Kind = "consumer_byte_rate"
	RequestPercentage Kind = "request_percentage"
)

// Kinds lists every kind, for validation.
var Kinds = []Kind{ProducerByteRate, ConsumerByteRate, RequestPercentage}

// ValidKind reports whether k is a quota kind this broker enforces.
func ValidKind(k string) bool {
	for _, v := range Kinds {
		if string(v) == k {
			return true
		}
	}
	return false
}

// Entity types, as the Kafka API names them.
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
)

// Default is the name that stands for an entity type's default.
const Default = "<default>"

// Part is one component of an entity: absent (!Set), the default
// (Default), or a name.
type Part struct {
	Set     bool
	Default bool
	Name    string // empty for the default
}

// Named returns a part naming name; DefaultPart the default.
func Named(name string) Part { return Part{Set: true, Name: name} }

// DefaultPart is the default entity of a type.
var DefaultPart = Part{Set: true, Default: true}

func (p Part) String() string {
	if p.Default {
		return Default
	}
	return p.Name
}

// Entity is what a quota is set on. At least one part is set.
type Entity struct {
	User, Client Part
}

// String renders the entity as Kafka's tools do: "user=alice,client-id=<default>".
func (e Entity) String() string {
	var parts []string
	if e.User.Set {
		parts = append(parts, TypeUser+"="+e.User.String())
	}
	if e.Client.Set {
		parts = append(parts, TypeClientID+"="+e.Client.String())
	}
	return strings.Join(parts, ",")
}

// Prefix is the metadata store prefix under which quotas live.
const Prefix = "/client-quotas/"

func escape(p Part) string {
	if p.Default {
		return Default
	}
	return url.QueryEscape(p.Name)
}

func unescape(s string) (Part, error) {
	if s == Default {
		return DefaultPart, nil
	}
	n, err := url.QueryUnescape(s)
	return Named(n), err
}

// Key is the entity's metadata store key.
func (e Entity) Key() string {
	switch {
	case e.User.Set && e.Client.Set:
		return Prefix + "users/" + escape(e.User) + "/clients/" + escape(e.Client)
	case e.User.Set:
		return Prefix + "users/" + escape(e.User)
	default:
		return Prefix + "clients/" + escape(e.Client)
	}
}

// ParseKey is Key's inverse.
func ParseKey(key string) (Entity, error) {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return Entity{}, fmt.Errorf("quota: key %q is not under %s", key, Prefix)
	}
	f := strings.Split(rest, "/")
	var e Entity
	var err error
	switch {
	case len(f) == 2 && f[0] == "users" && f[1] != "":
		e.User, err = unescape(f[1])
	case len(f) == 2 && f[0] == "clients" && f[1] != "":
		e.Client, err = unescape(f[1])
	case len(f) == 4 && f[0] == "users" && f[2] == "clients" && f[1] != "" && f[3] != "":
		if e.User, err = unescape(f[1]); err == nil {
			e.Client, err = unescape(f[3])
		}
	default:
		return Entity{}, fmt.Errorf("quota: malformed key %q", key)
	}
	if err != nil {
		return Entity{}, fmt.Errorf("quota: malformed key %q: %w", key, err)
	}
	return e, nil
}

// candidates lists, most specific first, the entities whose quota applies
// to a request from user and client, each with the sensor entity that
// measures it (the same shape with the real names).
func candidates(user, client string) [8][2]Entity {
	u, c := Named(user), Named(client)
	du, dc := DefaultPart, DefaultPart
	none := Part{}
	return [8][2]Entity{
		{{u, c}, {u, c}},
		{{u, dc}, {u, c}},
		{{u, none}, {u, none}},
		{{du, c}, {u, c}},
		{{du, dc}, {u, c}},
		{{du, none}, {u, none}},
		{{none, c}, {none, c}},
		{{none, dc}, {none, c}},
	}
}
