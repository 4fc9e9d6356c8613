package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

var completionCommands = []command{
	{path: "completion", args: "bash|zsh|fish", summary: "print a shell completion script (e.g. source <(vltava completion bash))"},
}

// The command table is built from completionCommands, and completionCmd
// reads the table: set run here to break the initialization cycle.
func init() {
	for i := range commands {
		if commands[i].path == "completion" {
			commands[i].run = completionCmd
		}
	}
}

func completionCmd(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	tree := completionTree()
	switch pos[0] {
	case "bash":
		writeBash(e.stdout, tree, false)
	case "zsh":
		writeBash(e.stdout, tree, true)
	case "fish":
		writeFish(e.stdout, tree)
	default:
		return usagef("shell %q: want bash, zsh or fish", pos[0])
	}
	return nil
}

// completionTree maps each command path prefix ("", "topic", "topic
// create") to what may follow it: the next words, or a command's flags.
func completionTree() map[string][]string {
	tree := map[string][]string{}
	add := func(k, v string) {
		if !slices.Contains(tree[k], v) {
			tree[k] = append(tree[k], v)
		}
	}
	for _, g := range []string{"-b", "--bootstrap", "--timeout", "--version", "-h"} {
		add("", g)
	}
	for i := range commands {
		c := &commands[i]
		words := strings.Fields(c.path)
		for j := range words {
			add(strings.Join(words[:j], " "), words[j])
		}
		for _, fl := range commandFlags(c) {
			add(c.path, fl)
		}
		if c.path == "completion" {
			for _, s := range []string{"bash", "zsh", "fish"} {
				add(c.path, s)
			}
		}
	}
	return tree
}

// commandFlags lists a command's flags by running it with -h into a
// discarding env: every command parses its flags before doing anything.
func commandFlags(c *command) []string {
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, timeout: defaultTimeout}
	var fs *flag.FlagSet
	e.onFlags = func(f *flag.FlagSet) { fs = f }
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing may run for real
	_ = c.run(ctx, e, c, []string{"-h"})
	if fs == nil {
		return nil
	}
	var out []string
	fs.VisitAll(func(fl *flag.Flag) {
		if len(fl.Name) == 1 {
			out = append(out, "-"+fl.Name)
		} else {
			out = append(out, "--"+fl.Name)
		}
	})
	return out
}

func sortedKeys(tree map[string][]string) []string {
	keys := make([]string, 0, len(tree))
	for k := range tree {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// writeBash prints a bash completion function; zsh loads the same through
// bashcompinit.
func writeBash(w io.Writer, tree map[string][]string, zsh bool) {
	if zsh {
		fmt.Fprintln(w, "#compdef vltava\nautoload -U +X bashcompinit && bashcompinit")
	}
	fmt.Fprint(w, `_vltava() {
	local cur="${COMP_WORDS[COMP_CWORD]}" path="" w i
	# The command path is the longest run of known words after vltava.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w="${COMP_WORDS[i]}"
		case "$w" in -*) continue ;; esac
		if _vltava_known "${path:+$path }$w"; then path="${path:+$path }$w"; fi
	done
	COMPREPLY=($(compgen -W "$(_vltava_next "$path")" -- "$cur"))
}
_vltava_known() {
	case "$1" in
`)
	for _, k := range sortedKeys(tree) {
		if k != "" {
			fmt.Fprintf(w, "\t%q) return 0 ;;\n", k)
		}
	}
	fmt.Fprint(w, "\tesac\n\treturn 1\n}\n_vltava_next() {\n\tcase \"$1\" in\n")
	for _, k := range sortedKeys(tree) {
		fmt.Fprintf(w, "\t%q) echo %q ;;\n", k, strings.Join(tree[k], " "))
	}
	fmt.Fprint(w, "\tesac\n}\ncomplete -F _vltava vltava\n")
}

// writeFish prints fish completions: the next words of each path, and each
// command's flags once its last word was given.
func writeFish(w io.Writer, tree map[string][]string) {
	fmt.Fprintln(w, "complete -c vltava -f")
	for _, k := range sortedKeys(tree) {
		cond := "__fish_use_subcommand"
		if k != "" {
			words := strings.Fields(k)
			cond = "__fish_seen_subcommand_from " + words[len(words)-1]
			if len(words) > 1 {
				cond = "__fish_seen_subcommand_from " + words[0] + "; and " + cond
			}
		}
		var subs []string
		for _, v := range tree[k] {
			switch {
			case strings.HasPrefix(v, "--"):
				fmt.Fprintf(w, "complete -c vltava -n %q -l %s\n", cond, v[2:])
			case strings.HasPrefix(v, "-"):
				fmt.Fprintf(w, "complete -c vltava -n %q -s %s\n", cond, v[1:])
			default:
				subs = append(subs, v)
			}
		}
		if len(subs) > 0 {
			fmt.Fprintf(w, "complete -c vltava -n %q -a %q\n", cond, strings.Join(subs, " "))
		}
	}
}
