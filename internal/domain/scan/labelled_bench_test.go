package scan

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/devstack/gitleakssamples"
)

// The labelled benchmark weighs the built-in rules (gitleaks' default
// configuration plus gitfleet's extension) against gitleaks' default
// configuration alone on two corpora: the samples gitleaks' rule generator
// validates its rules with (gitleakssamples; nobody at gitfleet wrote
// them, so they do not measure our tuning, but they are gitleaks' own: its
// rules find every true one by construction) and the project's corpus
// (corpus_test.go, written while tuning the rules gitfleet once had). So
// gitleaks' samples judge what the extension adds in false positives, and
// only the project's corpus can show what it adds in recall. Both sets are
// run by this engine.

// labelledSample is one sample of either corpus.
type labelledSample struct {
	family string // the generating rule's id (gitleaks' samples) or the corpus family
	path   string
	text   string
	secret string // the secret in text, when known: a finding must overlap it
	isTrue bool
}

// samplePath is where a sample without a path of its own is scanned: a
// name no global allowlist of either rule set skips.
const samplePath = "sample.txt"

// hitRules is the ids of the rules whose findings count for l: for a true
// sample whose secret is known those overlapping it, otherwise all (the
// generator's samples are scanned as whole blobs, as gitleaks validates
// them, and its false samples must yield no finding at all).
func hitRules(s *Scanner, l labelledSample) map[string]bool {
	path := l.path
	if path == "" {
		path = samplePath
	}
	start, end := -1, -1
	if l.isTrue && l.secret != "" {
		start = strings.Index(l.text, l.secret)
		end = start + len(l.secret)
	}
	hits := map[string]bool{}
	for _, f := range s.Scan(path, []byte(l.text), "").Findings {
		if start >= 0 && f.Start != f.End && (f.End <= start || f.Start >= end) {
			continue
		}
		hits[f.RuleID] = true
	}
	return hits
}

// The rule sets compared, in column order.
const (
	setGitleaks = iota
	setGitfleet
	setCount
)

type familyRow struct {
	trueN, falseN int
	found, fp     [setCount]int
}

func (r *familyRow) add(o *familyRow) {
	r.trueN += o.trueN
	r.falseN += o.falseN
	for i := range r.found {
		r.found[i] += o.found[i]
		r.fp[i] += o.fp[i]
	}
}

// ruleBenefit is what one own rule flags, and adds to gitleaks' defaults.
type ruleBenefit struct {
	tp, fp                 int            // true and false samples it flags
	addTP, addFP           int            // of those, the ones gitleaks' defaults flag nothing in
	aloneTP                int            // added true samples no other own rule flags
	tpFrom, fpFrom         map[string]int // families of the added samples
	tpExamples, fpExamples []string
}

type labelledResult struct {
	rows    map[string]*familyRow // by family
	benefit map[string]*ruleBenefit
	// What gitleaks' defaults do with each sample by the rule that
	// generated it, when the family is a rule id: gitleaks validated that
	// rule alone finds each true sample and flags no false one.
	selfFound, selfFP int
	selfMisses        map[string]int // "rule (true|false) -> rules that flag it instead": samples
}

// measureLabelled scans every sample with gitleaks' defaults (gl) and the
// built-in rules (def), and attributes what def flags and gl does not to
// the own rules that flag it.
func measureLabelled(gl, def *Scanner, own []string, samples []labelledSample) labelledResult {
	res := labelledResult{rows: map[string]*familyRow{}, benefit: map[string]*ruleBenefit{}, selfMisses: map[string]int{}}
	isOwn := map[string]bool{}
	for _, id := range own {
		isOwn[id] = true
		res.benefit[id] = &ruleBenefit{tpFrom: map[string]int{}, fpFrom: map[string]int{}}
	}
	for _, l := range samples {
		row := res.rows[l.family]
		if row == nil {
			row = &familyRow{}
			res.rows[l.family] = row
		}
		g, d := hitRules(gl, l), hitRules(def, l)
		if l.isTrue && g[l.family] {
			res.selfFound++
		} else if g[l.family] {
			res.selfFP++
		}
		if g[l.family] != l.isTrue {
			res.selfMisses[fmt.Sprintf("%s (true=%v) -> %v", l.family, l.isTrue, sortedKeys(g))]++
		}
		flagged := [setCount]bool{len(g) > 0, len(d) > 0}
		for i, f := range flagged {
			if f && l.isTrue {
				row.found[i]++
			} else if f {
				row.fp[i]++
			}
		}
		if l.isTrue {
			row.trueN++
		} else {
			row.falseN++
		}
		var ownHits []string
		for id := range d {
			if isOwn[id] {
				ownHits = append(ownHits, id)
			}
		}
		for _, id := range ownHits {
			b := res.benefit[id]
			if l.isTrue {
				b.tp++
			} else {
				b.fp++
			}
			if len(g) > 0 {
				continue
			}
			example := fmt.Sprintf("%s: %q", l.family, clip(l.text, 110))
			if l.isTrue {
				b.addTP++
				b.tpFrom[l.family]++
				if len(ownHits) == 1 {
					b.aloneTP++
				}
				if len(b.tpExamples) < 2 {
					b.tpExamples = append(b.tpExamples, example)
				}
			} else {
				b.addFP++
				b.fpFrom[l.family]++
				if len(b.fpExamples) < 2 {
					b.fpExamples = append(b.fpExamples, example)
				}
			}
		}
	}
	return res
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// coarseFamily is a generating rule id's first dash-separated word:
// "sentry-access-token" is sentry, "github-pat" github.
func coarseFamily(id string) string {
	head, _, _ := strings.Cut(id, "-")
	return head
}

func coarsen(rows map[string]*familyRow) map[string]*familyRow {
	out := map[string]*familyRow{}
	for fam, r := range rows {
		c := out[coarseFamily(fam)]
		if c == nil {
			c = &familyRow{}
			out[coarseFamily(fam)] = c
		}
		c.add(r)
	}
	return out
}

func pct(n, d int) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(d))
}

// writeFamilies prints one row per family: its samples, then for each rule
// set the true samples found (recall) and the false samples flagged (FP
// rate); "*" marks a family where the built-in set differs from gitleaks'
// alone. It ends with the families where the built-in set finds less or
// flags more than gitleaks' (the target: none).
func writeFamilies(sb *strings.Builder, title string, rows map[string]*familyRow) {
	fmt.Fprintf(sb, "\n%s\n", title)
	fmt.Fprintf(sb, "%-36s %5s %5s | %-19s | %-19s\n", "", "", "", "(a) gitleaks", "(b) built-in")
	fmt.Fprintf(sb, "%-36s %5s %5s | %5s %6s %6s | %5s %6s %6s\n", "family", "true", "false",
		"found", "recall", "FP", "found", "recall", "FP")
	var worse []string
	line := func(name string, r *familyRow) {
		mark := " "
		if r.found[setGitfleet] != r.found[setGitleaks] || r.fp[setGitfleet] != r.fp[setGitleaks] {
			mark = "*"
		}
		if r.found[setGitfleet] < r.found[setGitleaks] || r.fp[setGitfleet] > r.fp[setGitleaks] {
			worse = append(worse, name)
		}
		fmt.Fprintf(sb, "%-34s %s %5d %5d", clip(name, 34), mark, r.trueN, r.falseN)
		for i := 0; i < setCount; i++ {
			fmt.Fprintf(sb, " | %5d %6s %6s", r.found[i], pct(r.found[i], r.trueN), fmt.Sprintf("%d", r.fp[i]))
		}
		sb.WriteString("\n")
	}
	var total familyRow
	for _, fam := range sortedKeys(rows) {
		line(fam, rows[fam])
		total.add(rows[fam])
	}
	line("total", &total)
	fmt.Fprintf(sb, "%-36s %5s %5s", "rates (recall / FP rate)", "", "")
	for i := 0; i < setCount; i++ {
		fmt.Fprintf(sb, " | %5s %6s %6s", "", pct(total.found[i], total.trueN), pct(total.fp[i], total.falseN))
	}
	if len(worse) == 0 {
		worse = []string{"none"}
	}
	fmt.Fprintf(sb, "\nfamilies where the built-in set finds less or flags more than gitleaks': %s\n", strings.Join(worse, ", "))
}

// ownRuleIDs is the ids of the rules the built-in set adds to gitleaks'.
func ownRuleIDs(def, gl *RuleSet) []string {
	glIDs := map[string]bool{}
	for _, r := range gl.Rules() {
		glIDs[r.ID] = true
	}
	var own []string
	for _, r := range def.Rules() {
		if !glIDs[r.ID] {
			own = append(own, r.ID)
		}
	}
	return own
}

// verdict judges an own rule. Every true sample of gitleaks' generator was
// validated against gitleaks' own rules, so no rule can add recall there:
// that corpus judges the false positives, and added recall can only show
// on the project's corpus, written with our rules (its added samples are
// printed, to be checked for a real token format).
func verdict(gen, proj *ruleBenefit) (kind, why string) {
	added := fmt.Sprintf("+%d true of gitleaks' samples, +%d of the project corpus (%d alone)", gen.addTP, proj.addTP, proj.aloneTP)
	switch {
	case gen.addFP > 0 || proj.addFP > 0:
		return "delete or fix", fmt.Sprintf("+%d false positives of gitleaks' samples, +%d of the project corpus; %s", gen.addFP, proj.addFP, added)
	case gen.addTP > 0 || proj.addTP > 0:
		return "keep", added
	default:
		return "delete", "adds nothing"
	}
}

func families(m map[string]int) string {
	var out []string
	for _, fam := range sortedKeys(m) {
		out = append(out, fmt.Sprintf("%s %d", fam, m[fam]))
	}
	return strings.Join(out, ", ")
}

func writeBenefit(sb *strings.Builder, own []string, gen, proj labelledResult) {
	fmt.Fprintf(sb, "\nWhat each own rule adds to gitleaks' defaults: TP/FP = true/false samples it flags; +TP/+FP = those in which gitleaks' defaults find nothing; alone = +TP no other own rule flags\n")
	fmt.Fprintf(sb, "%-34s | %-26s | %-25s | %s\n", "", "gitleaks' samples", "project corpus", "")
	fmt.Fprintf(sb, "%-34s | %5s %4s %5s %5s %4s | %4s %4s %4s %5s %4s | %s\n", "own rule", "TP", "FP", "+TP", "alone", "+FP", "TP", "FP", "+TP", "alone", "+FP", "+FP (gitleaks' samples) / +TP (project corpus) by family")
	for _, id := range own {
		g, p := gen.benefit[id], proj.benefit[id]
		var from []string
		if len(g.fpFrom) > 0 {
			from = append(from, "+FP: "+families(g.fpFrom))
		}
		if len(g.tpFrom) > 0 {
			from = append(from, "+TP: "+families(g.tpFrom))
		}
		if len(p.tpFrom) > 0 {
			from = append(from, "project +TP: "+families(p.tpFrom))
		}
		fmt.Fprintf(sb, "%-34s | %5d %4d %5d %5d %4d | %4d %4d %4d %5d %4d | %s\n", clip(id, 34),
			g.tp, g.fp, g.addTP, g.aloneTP, g.addFP, p.tp, p.fp, p.addTP, p.aloneTP, p.addFP, strings.Join(from, "; "))
	}
	fmt.Fprintf(sb, "\nVerdict per own rule: keep = adds recall and no false positive (recall only the project corpus can show: gitleaks' true samples are all found by gitleaks' rules by construction)\n")
	groups := map[string][]string{}
	for _, id := range own {
		kind, why := verdict(gen.benefit[id], proj.benefit[id])
		groups[kind] = append(groups[kind], id+": "+why)
	}
	for _, kind := range []string{"keep", "delete", "delete or fix"} {
		fmt.Fprintf(sb, "%s (%d):\n", kind, len(groups[kind]))
		for _, v := range groups[kind] {
			fmt.Fprintf(sb, "  %s\n", v)
		}
	}
	for _, id := range own {
		for _, ex := range gen.benefit[id].fpExamples {
			fmt.Fprintf(sb, "added false positive of %s, gitleaks' sample of %s\n", id, ex)
		}
		for _, ex := range proj.benefit[id].fpExamples {
			fmt.Fprintf(sb, "added false positive of %s, project sample of %s\n", id, ex)
		}
		for _, ex := range proj.benefit[id].tpExamples {
			fmt.Fprintf(sb, "added true sample of %s, project sample of %s\n", id, ex)
		}
	}
}

var labelledOnce sync.Once

// BenchmarkLabelledSamples prints, per family, the recall and false
// positives of gitleaks' defaults and gitfleet's built-in rules on
// gitleaks' generator samples and on the project's corpus, what
// each own rule adds to gitleaks' defaults, and the verdict on it. The
// timed loop scans the generator's samples with both rule sets.
func BenchmarkLabelledSamples(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	raw, err := gitleakssamples.Load(ctx, GitleaksVersion)
	if err != nil {
		b.Fatalf("gitleaks %s generator samples: %v", GitleaksVersion, err)
	}
	glRules, err := LoadFile(gitleaksConfig(b))
	if err != nil {
		b.Fatalf("gitleaks' default configuration: %v (the gitleaks module is a dependency: `go mod download`)", err)
	}
	defRules := mustDefault(b)
	gl, def := newTestScanner(b, glRules), newTestScanner(b, defRules)
	own := ownRuleIDs(defRules, glRules)

	gen := make([]labelledSample, len(raw))
	for i, s := range raw {
		gen[i] = labelledSample{family: s.Rule, path: s.Path, text: s.Text, isTrue: s.True}
	}
	var proj []labelledSample
	for _, c := range defaultCorpus() {
		proj = append(proj, labelledSample{family: c.family, path: c.path, text: c.text, secret: c.secret, isTrue: c.isTrue})
	}

	labelledOnce.Do(func() {
		genRes, projRes := measureLabelled(gl, def, own, gen), measureLabelled(gl, def, own, proj)
		var sb strings.Builder
		cache, _ := gitleakssamples.CachePath(GitleaksVersion)
		unique := map[labelledSample]bool{}
		sampled := map[string]bool{}
		var trueN int
		for _, l := range gen {
			unique[l] = true
			sampled[l.family] = true
			if l.isTrue {
				trueN++
			}
		}
		var unsampled []string
		for _, r := range glRules.Rules() {
			if !sampled[r.ID] {
				unsampled = append(unsampled, r.ID)
			}
		}
		sort.Strings(unsampled)
		fmt.Fprintf(&sb, "\ngitleaks %s generator samples (one random extraction, cached in %s): %d true, %d false (%d distinct), of %d of its %d rules; without samples: %s\n",
			GitleaksVersion, cache, trueN, len(gen)-trueN, len(unique), len(sampled), glRules.Len(), strings.Join(unsampled, ", "))
		fmt.Fprintf(&sb, "(a) gitleaks' default configuration, %d rules; (b) gitfleet's built-in rules, %d rules: gitleaks' plus %d of gitfleet's extension\n",
			glRules.Len(), defRules.Len(), len(own))
		writeFamilies(&sb, "gitleaks' generator samples by generating rule: found = true samples with a finding, FP = false samples with a finding", genRes.rows)
		writeFamilies(&sb, "gitleaks' generator samples by coarse family (the generating rule id's first word)", coarsen(genRes.rows))
		writeFamilies(&sb, "The project's labelled corpus (corpus_test.go) by family: found = a finding overlaps the secret", projRes.rows)
		fmt.Fprintf(&sb, "\nEngine check: gitleaks' defaults, run by this engine, find %d of the %d true samples by the rule that generated them and flag %d of the %d false ones by it (gitleaks validates %d and 0)\n",
			genRes.selfFound, trueN, genRes.selfFP, len(gen)-trueN, trueN)
		for _, m := range sortedKeys(genRes.selfMisses) {
			fmt.Fprintf(&sb, "  %s: %d\n", m, genRes.selfMisses[m])
		}
		writeBenefit(&sb, own, genRes, projRes)
		fmt.Fprint(os.Stdout, sb.String())
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, l := range gen {
			path := l.path
			if path == "" {
				path = samplePath
			}
			gl.Scan(path, []byte(l.text), "")
			def.Scan(path, []byte(l.text), "")
		}
	}
}
