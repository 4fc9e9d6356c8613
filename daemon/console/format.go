package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/vltava/vltava/daemon/inspect"
)

func humanBytes(n int64) string {
	if n < 0 {
		return "-"
	}
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func joinInts(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ", ")
}

// lagChart draws a group's lag samples as an inline SVG polyline (no
// JavaScript): time left to right, lag bottom to top, the maximum marked.
func lagChart(samples []inspect.LagSample) template.HTML {
	if len(samples) < 2 {
		return ""
	}
	const w, h, pad = 600.0, 140.0, 24.0
	t0, t1 := samples[0].At, samples[len(samples)-1].At
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	var maxLag int64 = 1
	for _, s := range samples {
		maxLag = max(maxLag, s.Lag)
	}
	var pts strings.Builder
	for i, s := range samples {
		x := pad + (w-2*pad)*s.At.Sub(t0).Seconds()/span
		y := h - pad - (h-2*pad)*float64(s.Lag)/float64(maxLag)
		if i > 0 {
			pts.WriteByte(' ')
		}
		fmt.Fprintf(&pts, "%.1f,%.1f", x, y)
	}
	svg := fmt.Sprintf(`<svg class="chart" id="lag-chart" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="lag over time">`+
		`<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#d9e0e7"/>`+
		`<polyline fill="none" stroke="#1f6feb" stroke-width="2" points="%s"/>`+
		`<text x="%.0f" y="14" font-size="11" fill="#5b6b7b">max %d</text>`+
		`<text x="%.0f" y="%.0f" font-size="11" fill="#5b6b7b">%s</text>`+
		`<text x="%.0f" y="%.0f" font-size="11" fill="#5b6b7b" text-anchor="end">%s</text></svg>`,
		w, h, w, h, pad, h-pad, w-pad, h-pad, pts.String(), pad, maxLag,
		pad, h-6, t0.UTC().Format(time.TimeOnly), w-pad, h-6, t1.UTC().Format(time.TimeOnly))
	return template.HTML(svg)
}
