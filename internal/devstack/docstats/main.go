// Command docstats prints the size of what a maintainer has to read and
// keep true: the words of the README and docs/, the settings gitfleet
// declares and the workflow change ids it still asks for. `make docs-check`
// runs it, so a change sees whether it added to the pile.
//
// Run from the repository's root.
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"gitfleet/internal/devstack/changeids"
	"gitfleet/internal/infra/config"
	"gitfleet/workflows"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "docstats:", err)
		os.Exit(1)
	}
}

func run() error {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "file\tlines\twords\t")
	var lines, words int
	for _, f := range append([]string{"README.md"}, docs...) {
		l, n, err := count(f)
		if err != nil {
			return err
		}
		lines, words = lines+l, words+n
		fmt.Fprintf(w, "%s\t%d\t%d\t\n", f, l, n)
	}
	fmt.Fprintf(w, "total\t%d\t%d\t\n", lines, words)
	if err := w.Flush(); err != nil {
		return err
	}
	uses, err := changeids.Scan("workflows")
	if err != nil {
		return err
	}
	baselines := 0
	for _, line := range workflows.Baselines() {
		baselines += len(line)
	}
	fmt.Printf("settings: %d declared (internal/infra/config)\n", len(config.Settings()))
	fmt.Printf("change ids: %d asked by the workflows at %d places, and %d baselines (workflows/changes.go, baseline.go)\n",
		len(changeids.IDs(uses)), len(uses), baselines)
	return nil
}

// count returns a file's lines and words (runs of non-space characters).
func count(path string) (lines, words int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for s.Scan() {
		lines++
		words += len(strings.Fields(s.Text()))
	}
	return lines, words, s.Err()
}
