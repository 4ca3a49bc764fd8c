package metrics

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// SDK collects the Temporal SDK's metrics (client.Options.MetricsHandler)
// for the same exposition as gitfleet's counters: SDK counters become
// Prometheus counters named with a _total suffix, gauges gauges, and timers
// histograms in seconds (_seconds). The SDK's tags become labels.
type SDK struct {
	mu       sync.Mutex
	families map[string]*family
}

// NewSDK is an empty SDK collector; Handler is what the client gets.
func NewSDK() *SDK { return &SDK{families: map[string]*family{}} }

// Handler is the client.MetricsHandler that records into s.
func (s *SDK) Handler() client.MetricsHandler { return sdkHandler{s: s} }

type kind int

const (
	kindCounter kind = iota
	kindGauge
	kindHistogram
)

// timerBuckets are the histogram buckets of the SDK's timers, in seconds.
var timerBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}

type family struct {
	name   string
	kind   kind
	series map[string]*series // by rendered labels
}

type series struct {
	labels  string
	value   float64  // counter or gauge
	buckets []uint64 // histogram: counts per bucket (not cumulative)
	count   uint64
	sum     float64
}

func (s *SDK) series(name string, k kind, tags map[string]string) (*series, *sync.Mutex) {
	name = sanitize(name)
	switch k {
	case kindCounter:
		name += "_total"
	case kindHistogram:
		name += "_seconds"
	}
	labels := renderLabels(tags)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.families[name]
	if f == nil {
		f = &family{name: name, kind: k, series: map[string]*series{}}
		s.families[name] = f
	}
	sr := f.series[labels]
	if sr == nil {
		sr = &series{labels: labels}
		if k == kindHistogram {
			sr.buckets = make([]uint64, len(timerBuckets))
		}
		f.series[labels] = sr
	}
	return sr, &s.mu
}

type sdkHandler struct {
	s    *SDK
	tags map[string]string
}

func (h sdkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	t := maps.Clone(h.tags)
	if t == nil {
		t = map[string]string{}
	}
	maps.Copy(t, tags)
	return sdkHandler{s: h.s, tags: t}
}

func (h sdkHandler) Counter(name string) client.MetricsCounter {
	sr, mu := h.s.series(name, kindCounter, h.tags)
	return metricFunc(func(v float64) { mu.Lock(); sr.value += v; mu.Unlock() })
}

func (h sdkHandler) Gauge(name string) client.MetricsGauge {
	sr, mu := h.s.series(name, kindGauge, h.tags)
	return metricFunc(func(v float64) { mu.Lock(); sr.value = v; mu.Unlock() })
}

func (h sdkHandler) Timer(name string) client.MetricsTimer {
	sr, mu := h.s.series(name, kindHistogram, h.tags)
	return metricFunc(func(v float64) {
		i, _ := slices.BinarySearch(timerBuckets, v)
		mu.Lock()
		if i < len(sr.buckets) {
			sr.buckets[i]++
		}
		sr.count++
		sr.sum += v
		mu.Unlock()
	})
}

// metricFunc is a counter, gauge and timer at once.
type metricFunc func(float64)

func (f metricFunc) Inc(d int64)            { f(float64(d)) }
func (f metricFunc) Update(v float64)       { f(v) }
func (f metricFunc) Record(d time.Duration) { f(d.Seconds()) }

// WriteText writes the SDK's metrics in the Prometheus text format.
func (s *SDK) WriteText(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s.families)) {
		f := s.families[name]
		typ := [...]string{"counter", "gauge", "histogram"}[f.kind]
		fmt.Fprintf(&b, "# TYPE %s %s\n", name, typ)
		for _, l := range slices.Sorted(maps.Keys(f.series)) {
			sr := f.series[l]
			if f.kind != kindHistogram {
				fmt.Fprintf(&b, "%s%s %s\n", name, braces(l), formatFloat(sr.value))
				continue
			}
			base := strings.TrimSuffix(name, "_seconds") + "_seconds"
			var cum uint64
			for i, le := range timerBuckets {
				cum += sr.buckets[i]
				fmt.Fprintf(&b, "%s_bucket%s %d\n", base, braces(join(l, `le="`+formatFloat(le)+`"`)), cum)
			}
			fmt.Fprintf(&b, "%s_bucket%s %d\n", base, braces(join(l, `le="+Inf"`)), sr.count)
			fmt.Fprintf(&b, "%s_sum%s %s\n", base, braces(l), formatFloat(sr.sum))
			fmt.Fprintf(&b, "%s_count%s %d\n", base, braces(l), sr.count)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

func braces(l string) string {
	if l == "" {
		return ""
	}
	return "{" + l + "}"
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// renderLabels renders tags as name="value" pairs, sorted by name.
func renderLabels(tags map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		parts = append(parts, sanitize(k)+`="`+escape(tags[k])+`"`)
	}
	return strings.Join(parts, ",")
}

// sanitize makes a metric or label name of [a-zA-Z0-9_:] not starting with a
// digit.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' && i > 0
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escape(v string) string { return labelEscaper.Replace(v) }
