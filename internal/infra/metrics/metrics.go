package metrics

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Counter is a monotonically increasing count, by label values.
type Counter struct {
	name, help string
	labels     []string

	mu     sync.Mutex
	values map[string]*atomic.Int64
}

var (
	registryMu sync.Mutex
	registry   []*Counter
)

// NewCounter registers a counter.
func NewCounter(name, help string, labels ...string) *Counter {
	c := &Counter{name: name, help: help, labels: labels, values: map[string]*atomic.Int64{}}
	registryMu.Lock()
	registry = append(registry, c)
	registryMu.Unlock()
	return c
}

func (c *Counter) cell(values []string) *atomic.Int64 {
	if len(values) != len(c.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", c.name, len(c.labels), len(values)))
	}
	key := strings.Join(values, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.values[key]
	if !ok {
		v = &atomic.Int64{}
		c.values[key] = v
	}
	return v
}

// Add adds n for the label values.
func (c *Counter) Add(n int64, values ...string) { c.cell(values).Add(n) }

// Inc adds one for the label values.
func (c *Counter) Inc(values ...string) { c.Add(1, values...) }

// Value is the count for the label values.
func (c *Counter) Value(values ...string) int64 { return c.cell(values).Load() }

// WriteText writes every counter in the Prometheus text exposition format.
func WriteText(w io.Writer) error {
	registryMu.Lock()
	cs := slices.Clone(registry)
	registryMu.Unlock()
	for _, c := range cs {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", c.name, c.help, c.name); err != nil {
			return err
		}
		c.mu.Lock()
		keys := make([]string, 0, len(c.values))
		for k := range c.values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			var labels []string
			if len(c.labels) > 0 {
				for i, v := range strings.Split(k, "\x00") {
					labels = append(labels, fmt.Sprintf("%s=%q", c.labels[i], v))
				}
			}
			l := ""
			if len(labels) > 0 {
				l = "{" + strings.Join(labels, ",") + "}"
			}
			if _, err := fmt.Fprintf(w, "%s%s %d\n", c.name, l, c.values[k].Load()); err != nil {
				c.mu.Unlock()
				return err
			}
		}
		c.mu.Unlock()
	}
	return nil
}

// The GitHub API and its cache (architecture §6).
var (
	GitHubRequests = NewCounter("gitfleet_github_requests_total",
		"GitHub API requests by endpoint pattern and HTTP status (0: no answer).", "endpoint", "status")
	GitHubNotModified = NewCounter("gitfleet_github_not_modified_total",
		"GitHub API pages answered 304 Not Modified (no quota spent).")
	GitHubCacheLookups = NewCounter("gitfleet_github_cache_lookups_total",
		"Reads of the GitHub cache by outcome: hit, miss (fetched first) or refresh (asked for).", "outcome")
	GitHubRateLimitWaits = NewCounter("gitfleet_github_rate_limit_waits_total",
		"Requests not sent because the token's rate limit holds.")
)

// Collections, scans and snapshot pulls.
var (
	Collections = NewCounter("gitfleet_collections_total",
		"Collections whose identity was applied, by identity case.", "case")
	BlobsScanned = NewCounter("gitfleet_scan_blobs_total",
		"Blobs read and scanned (not skipped) by shard scans.")
	BytesScanned = NewCounter("gitfleet_scan_bytes_total",
		"Bytes of the blobs scanned by shard scans.")
	Findings = NewCounter("gitfleet_findings_total",
		"Findings written by shard scans.")
	SnapshotPulls = NewCounter("gitfleet_snapshot_pulls_total",
		"Snapshot pulls on runners by outcome: ok or failed.", "outcome")
	SnapshotPullBytes = NewCounter("gitfleet_snapshot_pull_bytes_total",
		"Bytes snapshot pulls fetched, by source kind: registry or peer.", "source")
)
