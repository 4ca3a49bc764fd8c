package faulttest

import (
	"bytes"
	"fmt"
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

// BenchmarkSnapshotPropagation propagates a 40 MiB image (5 layers) from a
// registry limited to 50 MB/s to fleets of 1, 5 and 10 runner processes,
// and prints for each the time until the whole fleet is ready, the
// registry's egress in copies of the image, the bytes peers served, and
// the runners' peak RSS; beside it, plain go-containerregistry pulls of the
// same image by as many processes from the same registry. Goals: egress
// about one copy whatever the fleet size; fleet-ready time well under the
// plain pulls' (whose egress grows with the fleet); a pull adds little to
// a runner's RSS, since layers stream to disk.
func BenchmarkSnapshotPropagation(b *testing.B) {
	const (
		layers    = 5
		layerSize = 8 << 20
		rate      = 50_000_000
	)
	startCentral(b)
	reg := startRegistry(b, ociregistry.Options{BytesPerSecond: rate})
	img := pushImage(b, reg, "bench/snapshot", 99, layers, layerSize)
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	b.Logf("image %s: %.1f MB in %d layers; registry egress limited to %.0f MB/s", img.digest[:19], mb(img.size), layers, mb(rate))

	for _, fleet := range []int{1, 5, 10} {
		b.Run(fmt.Sprintf("runners=%d", fleet), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ready, egress, peers, idle, rss := propagateToFleet(b, reg, img, fleet)
				plainWall, plainEgress, plainRSS := plainPulls(b, reg, img, fleet)
				b.ReportMetric(ready.Seconds(), "fleet-ready-s")
				b.ReportMetric(float64(egress)/float64(img.size), "registry-copies")
				b.ReportMetric(float64(rss)/1e6, "runner-peak-rss-MB")
				b.ReportMetric(plainWall.Seconds(), "plain-pulls-s")
				b.Logf("%2d runners: fleet ready in %5.2fs, registry sent %6.1f MB (%.2f copies), peers %6.1f MB, runner peak RSS %5.1f MB (%.1f MB before the pull)",
					fleet, ready.Seconds(), mb(egress), float64(egress)/float64(img.size), mb(peers), mb(rss), mb(idle))
				b.Logf("%2d plain pulls (go-containerregistry, one process each, at once): %5.2fs, registry sent %6.1f MB (%.2f copies), peak RSS %5.1f MB",
					fleet, plainWall.Seconds(), mb(plainEgress), float64(plainEgress)/float64(img.size), mb(plainRSS))
				b.Logf("goals: registry copies ≈ 1 (got %.2f); fleet ready ≤ plain pulls (%.2fs vs %.2fs); the pull adds little RSS whatever the image's size (+%.1f MB for %.1f MB)",
					float64(egress)/float64(img.size), ready.Seconds(), plainWall.Seconds(), mb(rss-idle), mb(img.size))
			}
		})
	}
}

// propagateToFleet starts n runner processes, propagates img to them and
// returns the time until all are ready, the registry's and the peers'
// bytes, and the highest peak RSS of a runner. The runners are gone, with
// their rows, when it returns.
func propagateToFleet(b *testing.B, reg *ociregistry.Registry, img testImage, n int) (ready time.Duration, egress, peers, idleRSS, peakRSS int64) {
	b.Helper()
	procs := make([]*workerProc, n)
	ids := make([]string, n)
	for i := range procs {
		ids[i] = fmt.Sprintf("bench-%d-%d", n, i)
		procs[i] = launchRunner(b, ids[i], b.TempDir())
	}
	for _, p := range procs {
		p.waitStarted(b)
		idleRSS = max(idleRSS, vmHWM(p.pid()))
	}
	defer func() {
		for i, p := range procs {
			p.forget(b, ids[i])
		}
	}()
	reg.ResetCounters()
	b.ResetTimer()
	start := time.Now()
	res := propagationResult(b, propagate(b, snapName(fmt.Sprintf("bench%d", n)), img.ref,
		workflows.PullTiming{Queue: time.Minute, Fresh: time.Minute}), 10*time.Minute)
	ready = time.Since(start)
	b.StopTimer()
	if res.Ready != n {
		b.Fatalf("propagation to %d runners = %+v", n, res)
	}
	for _, p := range procs {
		peakRSS = max(peakRSS, vmHWM(p.pid()))
	}
	return ready, reg.BlobBytes(), res.FromPeers, idleRSS, peakRSS
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
