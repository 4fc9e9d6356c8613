package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// outputFlag registers --output (-o) on a listing command.
func outputFlag(f *cmdFlags) *string {
	o := f.String("output", "table", "output `FORMAT`: table or json")
	f.StringVar(o, "o", "table", "same as --output")
	return o
}

// checkOutput validates an --output value.
func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return usagef("--output %q: want table or json", o)
	}
	return nil
}

// table is a listing: column names and rows. Printed as aligned columns,
// or as JSON: an array of objects keyed by the lower-cased column names
// with "-" turned into "_"; cells keep their Go type (numbers stay
// numbers, nil is null).
type table struct {
	cols []string
	rows [][]any
}

func newTable(cols ...string) *table { return &table{cols: cols} }

func (t *table) add(cells ...any) { t.rows = append(t.rows, cells) }

// write prints the table in format ("table" or "json").
func (t *table) write(w io.Writer, format string) error {
	if format == "json" {
		return json.NewEncoder(w).Encode(t.objects())
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.cols, "\t"))
	for _, r := range t.rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cellText(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// objects is the table as JSON objects.
func (t *table) objects() []map[string]any {
	out := make([]map[string]any, 0, len(t.rows))
	for _, r := range t.rows {
		o := make(map[string]any, len(t.cols))
		for i, c := range t.cols {
			o[jsonKey(c)] = r[i]
		}
		out = append(out, o)
	}
	return out
}

func jsonKey(col string) string {
	return strings.ReplaceAll(strings.ToLower(col), "-", "_")
}

func cellText(c any) string {
	switch v := c.(type) {
	case nil:
		return "-"
	case string:
		return orDash(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []int32:
		if len(v) == 0 {
			return "-"
		}
		return ints(v)
	default:
		return fmt.Sprint(v)
	}
}
