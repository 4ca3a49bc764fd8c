package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/workflows"
)

// envPlainPull makes the test binary a plain go-containerregistry pull of
// the image it names into a fresh layout (see TestMain): the comparison
// the propagation benchmark measures in its own process, for its RSS.
const envPlainPull = "FAULTTEST_PLAIN_PULL"

// plainPull pulls ref into a new image layout in dir with nothing but
// go-containerregistry: what a runner would do without gitfleet.
func plainPull(ref, dir string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	img, err := remote.Image(r)
	if err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}

// The benchmark's image and link (the setting by default; smaller
// for a quick run).
const (
	envBenchSnapshotMB     = "GITFLEET_BENCH_SNAPSHOT_MB"     // image size in MB (default 200)
	envBenchSnapshotLayers = "GITFLEET_BENCH_SNAPSHOT_LAYERS" // layers (default 5)
	envBenchSnapshotRate   = "GITFLEET_BENCH_SNAPSHOT_RATE"   // registry egress in MB/s (default 50)
	envBenchSnapshotFleets = "GITFLEET_BENCH_SNAPSHOT_FLEETS" // fleet sizes, comma-separated (default "1,10")
)

// Goals (issue 34): the fleet ready within these multiples of one plain
// pull of the same image from the same registry, measured in the same run;
// the registry sends one copy; a runner's peak RSS.
var snapshotReadyGoal = map[int]float64{1: 1.1, 10: 1.3}

const snapshotRSSGoal = 100e6

// BenchmarkSnapshotPropagation measures, in one run against a registry
// whose egress is throttled (50 MB/s), one plain pull of an image (200 MB
// in 5 layers) by go-containerregistry in its own process, and gitfleet's
// propagation of the same image to 1 and 10 runner processes, each fleet
// right after a plain pull of its own. It prints, beside each goal (MISSED
// where missed): the time until the whole fleet is ready over the plain
// pull's (1 runner ≤ 1.1×, 10 runners ≤ 1.3×), the registry's blob egress
// in copies of the image (1.00), and the runners' peak RSS (≤ 100 MB).
// GITFLEET_BENCH_SNAPSHOT_MB, _LAYERS, _RATE and _FLEETS make smaller
// runs; the figures printed say which size was used.
func BenchmarkSnapshotPropagation(b *testing.B) {
	sizeMB := envInt(b, envBenchSnapshotMB, 200)
	layers := envInt(b, envBenchSnapshotLayers, 5)
	rate := int64(envInt(b, envBenchSnapshotRate, 50)) * 1_000_000
	var fleets []int
	for _, f := range strings.Split(envOr(envBenchSnapshotFleets, "1,10"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s: %q is not a fleet size", envBenchSnapshotFleets, f)
		}
		fleets = append(fleets, n)
	}
	layerSize := int64(sizeMB) * 1_000_000 / int64(layers) / 512 * 512
	startCentral(b)
	reg := startRegistry(b, ociregistry.Options{BytesPerSecond: rate})
	img := pushImage(b, reg, "bench/snapshot", 99, layers, layerSize)
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	b.Logf("image %s: %.1f MB in %d layers (%s=%d, %s=%d); registry egress limited to %.0f MB/s (%s)",
		img.digest[:19], mb(img.size), layers, envBenchSnapshotMB, sizeMB, envBenchSnapshotLayers, layers, mb(rate), envBenchSnapshotRate)

	for _, fleet := range fleets {
		b.Run(fmt.Sprintf("runners=%d", fleet), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				plainWall, plainEgress, plainRSS := plainPulls(b, reg, img, 1)
				st := propagateToFleet(b, reg, img, fleet)
				ratio := st.ready.Seconds() / plainWall.Seconds()
				copies := float64(st.egress) / float64(img.size)
				b.ReportMetric(st.ready.Seconds(), "fleet-ready-s")
				b.ReportMetric(ratio, "x-plain-pull")
				b.ReportMetric(copies, "registry-copies")
				b.ReportMetric(float64(st.peakRSS)/1e6, "runner-peak-rss-MB")
				b.ReportMetric(plainWall.Seconds(), "plain-pull-s")
				b.Logf("%2d runners, %.0f MB image: one plain pull (go-containerregistry, own process) %.2fs, registry sent %.2f copies, peak RSS %.1f MB",
					fleet, mb(img.size), plainWall.Seconds(), float64(plainEgress)/float64(img.size), mb(plainRSS))
				b.Logf("%2d runners: first ready %.2fs, last ready %.2fs, propagation ended %.2fs; peers sent %.1f MB; the runners used %.1f s of CPU; load average %s at the start",
					fleet, st.first.Seconds(), st.last.Seconds(), st.ready.Seconds(), mb(st.peers), st.cpu.Seconds(), st.load)
				goal := snapshotReadyGoal[fleet]
				if goal == 0 {
					goal = snapshotReadyGoal[10]
				}
				b.Logf("%2d runners: fleet ready / one plain pull  %5.2f×   goal ≤ %.1f×%s", fleet, ratio, goal, missed(ratio > goal))
				b.Logf("%2d runners: registry egress            %5.2f copies   goal 1.00%s", fleet, copies, missed(math.Round(copies*100) > 100))
				b.Logf("%2d runners: runner peak RSS             %5.1f MB   goal ≤ %.0f MB%s (%.1f MB before the pull)",
					fleet, mb(st.peakRSS), mb(snapshotRSSGoal), missed(st.peakRSS > snapshotRSSGoal), mb(st.idleRSS))
			}
		})
	}
}

func missed(m bool) string {
	if m {
		return "   MISSED"
	}
	return ""
}

// fleetStats is what one propagation to a fleet measured.
type fleetStats struct {
	// ready: from the start until the propagation ended, every runner
	// ready; first and last: until the first and the last row went ready
	// (the database's clock, from the first row's creation).
	ready, first, last time.Duration
	egress, peers      int64
	// cpu is the runners' CPU time during the propagation; load the
	// machine's load average before it (the machine is shared).
	cpu              time.Duration
	load             string
	idleRSS, peakRSS int64
}

// propagateToFleet starts n runner processes, propagates img to them and
// returns the time until all are ready, the registry's and the peers'
// bytes, and the highest peak RSS of a runner. The runners are gone, with
// their rows, when it returns.
func propagateToFleet(b *testing.B, reg *ociregistry.Registry, img testImage, n int) (st fleetStats) {
	b.Helper()
	procs := make([]*workerProc, n)
	ids := make([]string, n)
	for i := range procs {
		ids[i] = fmt.Sprintf("bench-%d-%d", n, i)
		procs[i] = launchRunner(b, ids[i], b.TempDir())
	}
	for _, p := range procs {
		p.waitStarted(b)
		st.idleRSS = max(st.idleRSS, vmHWM(p.pid()))
		st.cpu -= cpuTime(p.pid())
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		st.load = strings.Join(strings.Fields(string(raw))[:3], " ")
	}
	defer func() {
		for i, p := range procs {
			p.forget(b, ids[i])
		}
	}()
	reg.ResetCounters()
	b.ResetTimer()
	start := time.Now()
	name := snapName(fmt.Sprintf("bench%d", n))
	res := propagationResult(b, propagate(b, name, img.ref,
		workflows.PullTiming{Queue: time.Minute, Fresh: time.Minute}), 10*time.Minute)
	st.ready = time.Since(start)
	b.StopTimer()
	var first, last float64
	if err := env.Store.Pool().QueryRow(context.Background(), `SELECT
		extract(epoch FROM min(updated_at) - min(created_at))::float8,
		extract(epoch FROM max(updated_at) - min(created_at))::float8
		FROM snapshot_runners WHERE snapshot_ref = $1 AND state = 'ready'`, name).Scan(&first, &last); err != nil {
		b.Fatal(err)
	}
	st.first, st.last = time.Duration(first*float64(time.Second)), time.Duration(last*float64(time.Second))
	if res.Ready != n {
		b.Fatalf("propagation to %d runners = %+v", n, res)
	}
	for _, p := range procs {
		st.peakRSS = max(st.peakRSS, vmHWM(p.pid()))
		st.cpu += cpuTime(p.pid())
	}
	st.egress, st.peers = reg.BlobBytes(), res.FromPeers
	return st
}

// plainPulls runs n plain pulls of img at once, each in its own process,
// and returns their wall time, the registry's bytes and the highest peak
// RSS among them.
func plainPulls(b *testing.B, reg *ociregistry.Registry, img testImage, n int) (wall time.Duration, egress, peakRSS int64) {
	b.Helper()
	reg.ResetCounters()
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run", "^$")
		cmds[i].Env = append(os.Environ(), envPlainPull+"="+img.ref+" "+filepath.Join(b.TempDir(), "oci"))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
	}
	start := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			b.Fatalf("plain pull: %v\n%s", err, outs[i].Bytes())
		}
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peakRSS = max(peakRSS, ru.Maxrss<<10) // kB on Linux
		}
	}
	return time.Since(start), reg.BlobBytes(), peakRSS
}

// vmHWM is a live process's peak resident set size in bytes (Linux), 0
// where unknown.
func vmHWM(pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(rest); len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// cpuTime is a live process's user and system CPU time (Linux), 0 where
// unknown.
func cpuTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which ends with the last ')':
	// utime and stime are the 12th and 13th, in clock ticks (100 Hz).
	_, rest, ok := strings.Cut(string(raw[bytes.LastIndexByte(raw, ')')+1:]), " ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+sys) * 10 * time.Millisecond
}

// runPlainPull is the child side of envPlainPull: "REF DIR".
func runPlainPull(spec string) int {
	ref, dir, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: want \"REF DIR\", got %q\n", envPlainPull, spec)
		return 2
	}
	if err := plainPull(ref, dir); err != nil {
		fmt.Fprintln(os.Stderr, "plain pull:", err)
		return 1
	}
	return 0
}
