package metrics

import (
	"strings"
	"testing"
)

func TestCounterText(t *testing.T) {
	c := NewCounter("test_things_total", "Things.", "kind")
	c.Inc("a")
	c.Add(2, "b")
	c.Inc("a")
	if c.Value("a") != 2 || c.Value("b") != 2 || c.Value("c") != 0 {
		t.Fatalf("values a=%d b=%d", c.Value("a"), c.Value("b"))
	}
	var b strings.Builder
	if err := WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# TYPE test_things_total counter\n", `test_things_total{kind="a"} 2` + "\n", `test_things_total{kind="b"} 2` + "\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("exposition lacks %q:\n%s", want, b.String())
		}
	}
}
