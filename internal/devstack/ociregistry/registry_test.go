package ociregistry

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func start(t *testing.T, opts Options) *Registry {
	t.Helper()
	r, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// push stores a one-layer image of layerSize and returns the layer.
func push(t *testing.T, r *Registry, seed int64, layerSize int64) v1.Layer {
	t.Helper()
	l, err := RandomLayer(seed, 0, layerSize)
	if err != nil {
		t.Fatal(err)
	}
	img, err := ImageOf(l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Push(r.Ref("test/img", fmt.Sprint("s", seed)), img); err != nil {
		t.Fatal(err)
	}
	return l
}

func digestOf(t *testing.T, l v1.Layer) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func wantBytes(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// get fetches a blob; it returns the status, the body read and the read
// error.
func get(t *testing.T, r *Registry, digest string) (int, []byte, error) {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr() + "/v2/test/img/blobs/" + digest)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func TestRandomLayerIsDeterministicAndSized(t *testing.T) {
	for _, size := range []int64{1, 2048, 4096, 1 << 20, 1<<20 + 7} {
		a, err := RandomLayer(7, 1, size)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := RandomLayer(7, 1, size)
		c, _ := RandomLayer(7, 2, size)
		if digestOf(t, a) != digestOf(t, b) || digestOf(t, a) == digestOf(t, c) {
			t.Fatalf("size %d: digests %s %s %s: want equal for equal seeds, different otherwise",
				size, digestOf(t, a), digestOf(t, b), digestOf(t, c))
		}
		body := wantBytes(t, a)
		n, _ := a.Size()
		if int64(len(body)) != n {
			t.Fatalf("size %d: Size() %d, read %d bytes", size, n, len(body))
		}
		if size%512 == 0 && size >= 2048 && n != size {
			t.Fatalf("size %d: got %d bytes", size, n)
		}
		if got := fmt.Sprintf("sha256:%x", sha256.Sum256(body)); got != digestOf(t, a) {
			t.Fatalf("size %d: body hashes to %s, Digest() says %s", size, got, digestOf(t, a))
		}
	}
	x, _ := RandomImage(3, 2, 4096)
	y, _ := RandomImage(3, 2, 4096)
	dx, _ := x.Digest()
	dy, _ := y.Digest()
	if dx != dy {
		t.Fatalf("RandomImage not deterministic: %s %s", dx, dy)
	}
}

func TestCountersCount(t *testing.T) {
	r := start(t, Options{})
	l := push(t, r, 1, 64<<10)
	d := digestOf(t, l)
	r.ResetCounters()
	for range 3 {
		if code, b, err := get(t, r, d); code != 200 || err != nil || len(b) != 64<<10 {
			t.Fatalf("GET: %d, %d bytes, %v", code, len(b), err)
		}
	}
	if r.BlobBytes() != 3*64<<10 || r.BlobBytesOf(d) != 3*64<<10 || r.BlobGets() != 3 || r.BlobGetsOf(d) != 3 {
		t.Fatalf("counters: bytes %d, of %d, gets %d, gets of %d", r.BlobBytes(), r.BlobBytesOf(d), r.BlobGets(), r.BlobGetsOf(d))
	}
	if r.BlobBytesOf("sha256:0000000000000000000000000000000000000000000000000000000000000000") != 0 {
		t.Fatal("counted an unrequested digest")
	}
	r.ResetCounters()
	if r.BlobBytes() != 0 || r.BlobBytesOf(d) != 0 || r.BlobGets() != 0 {
		t.Fatal("ResetCounters left counts")
	}
}

func TestFaultsFireExactlyNTimes(t *testing.T) {
	const size = 64 << 10
	for _, tc := range []struct {
		name  string
		arm   func(r *Registry, digest string)
		check func(t *testing.T, want []byte, code int, got []byte, err error)
	}{
		{"corrupt", func(r *Registry, d string) { r.Corrupt(d, 2) },
			func(t *testing.T, want []byte, code int, got []byte, err error) {
				if code != 200 || err != nil || len(got) != len(want) {
					t.Fatalf("corrupt: %d, %d bytes, %v", code, len(got), err)
				}
				diff := 0
				for i := range got {
					if got[i] != want[i] {
						diff++
						if i != len(want)/2 {
							t.Fatalf("byte %d differs, want only the middle one", i)
						}
					}
				}
				if diff != 1 {
					t.Fatalf("%d bytes differ, want 1", diff)
				}
			}},
		{"truncate", func(r *Registry, d string) { r.Truncate(d, 2) },
			func(t *testing.T, want []byte, code int, got []byte, err error) {
				if code != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != len(want)/2 {
					t.Fatalf("truncate: %d, %d bytes, %v", code, len(got), err)
				}
			}},
		{"fail", func(r *Registry, d string) { r.Fail(d, 2) },
			func(t *testing.T, want []byte, code int, got []byte, err error) {
				if code != 500 {
					t.Fatalf("fail: status %d", code)
				}
			}},
		{"fail after", func(r *Registry, d string) { r.FailAfter(d, 1000, 2) },
			func(t *testing.T, want []byte, code int, got []byte, err error) {
				if code != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(got, want[:1000]) {
					t.Fatalf("fail after: %d, %d bytes, %v", code, len(got), err)
				}
			}},
		{"any blob", func(r *Registry, _ string) { r.Fail("", 2) },
			func(t *testing.T, want []byte, code int, got []byte, err error) {
				if code != 500 {
					t.Fatalf("fail: status %d", code)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, Options{})
			l := push(t, r, 2, size)
			other := push(t, r, 3, size)
			d, want := digestOf(t, l), wantBytes(t, l)
			tc.arm(r, d)
			if code, b, err := get(t, r, digestOf(t, other)); tc.name != "any blob" && (code != 200 || err != nil || len(b) != size) {
				t.Fatalf("fault for %s hit another blob: %d, %v", d, code, err)
			} else if tc.name == "any blob" {
				tc.check(t, want, code, b, err)
			}
			shots := 2
			if tc.name == "any blob" {
				shots = 1
			}
			for range shots {
				code, b, err := get(t, r, d)
				tc.check(t, want, code, b, err)
			}
			if code, b, err := get(t, r, d); code != 200 || err != nil || !bytes.Equal(b, want) {
				t.Fatalf("after the armed shots: %d, %d bytes, %v", code, len(b), err)
			}
			if r.BlobGetsOf(d) != shots+1 {
				t.Fatalf("BlobGetsOf = %d, want %d", r.BlobGetsOf(d), shots+1)
			}
		})
	}
	t.Run("clear", func(t *testing.T) {
		r := start(t, Options{})
		l := push(t, r, 4, size)
		r.Corrupt("", 5)
		r.Clear()
		if code, b, err := get(t, r, digestOf(t, l)); code != 200 || err != nil || !bytes.Equal(b, wantBytes(t, l)) {
			t.Fatalf("after Clear: %d, %v", code, err)
		}
	})
}

func TestThrottleHoldsTheRate(t *testing.T) {
	const rate = 50 << 20
	const total = 10 << 20
	for _, conns := range []int{1, 2} {
		t.Run(fmt.Sprint(conns, " connections"), func(t *testing.T) {
			r := start(t, Options{BytesPerSecond: rate})
			var layers []v1.Layer
			for i := range conns {
				layers = append(layers, push(t, r, int64(10+i), total/int64(conns)))
			}
			begin := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, conns)
			for _, l := range layers {
				wg.Go(func() {
					code, b, err := get(t, r, digestOf(t, l))
					if code != 200 || err != nil || len(b) != total/conns {
						errs <- fmt.Errorf("GET: %d, %d bytes, %v", code, len(b), err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			elapsed := time.Since(begin)
			got := float64(total) / elapsed.Seconds()
			t.Logf("%d MB in %v: %.1f MB/s (limit %d MB/s)", total>>20, elapsed, got/(1<<20), rate>>20)
			if got > 1.3*rate {
				t.Fatalf("throughput %.1f MB/s exceeds 1.3x the %d MB/s limit", got/(1<<20), rate>>20)
			}
			// A generous floor: the bucket must not throttle far below its rate.
			if got < 0.4*rate {
				t.Fatalf("throughput %.1f MB/s is far below the %d MB/s limit", got/(1<<20), rate>>20)
			}
		})
	}
}

func TestDiskBlobs(t *testing.T) {
	r := start(t, Options{Dir: t.TempDir()})
	l := push(t, r, 5, 8192)
	if code, b, err := get(t, r, digestOf(t, l)); code != 200 || err != nil || !bytes.Equal(b, wantBytes(t, l)) {
		t.Fatalf("GET from disk: %d, %v", code, err)
	}
}

func TestSetRate(t *testing.T) {
	r := start(t, Options{BytesPerSecond: 1 << 20})
	l := push(t, r, 20, 4<<20)
	// 4 MB at 1 MB/s would take 4 s; lifting the limit makes it immediate.
	r.SetRate(0)
	begin := time.Now()
	if code, b, err := get(t, r, digestOf(t, l)); code != 200 || err != nil || len(b) != 4<<20 {
		t.Fatalf("GET: %d, %d bytes, %v", code, len(b), err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("unthrottled GET took %v", d)
	}
	r.SetRate(8 << 20)
	begin = time.Now()
	get(t, r, digestOf(t, l))
	if d := time.Since(begin); d < 400*time.Millisecond {
		t.Fatalf("4 MB at 8 MB/s took %v, want about 500ms", d)
	}
}
