package config

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// helpWidth is where --help wraps a setting's text.
const helpWidth = 100

// helpColumn is where a setting's text starts.
const helpColumn = 34

// WriteHelp writes the settings the given processes read, one entry
// each: its name, its help, its default and its file form. `worker --help`
// and `starter --help` print it, so that they say what the table says.
func WriteHelp(w io.Writer, r Reader) {
	for _, s := range Settings() {
		if s.Readers&r == 0 || s.fileOf != "" {
			continue
		}
		name := "  " + s.Name
		words := strings.Fields(s.Help)
		if tail := s.helpTail(); tail != "" {
			words = append(words, tail) // one word: never split
		}
		line := name
		if len(name) >= helpColumn-1 {
			fmt.Fprintln(w, name)
			line = ""
		}
		col := len(line)
		for i, word := range words {
			switch {
			case i == 0 || col+1+len(word) <= helpWidth:
				pad := 1
				if i == 0 {
					pad = helpColumn - col
				}
				line += strings.Repeat(" ", pad) + word
				col += pad + len(word)
			default:
				fmt.Fprintln(w, line)
				line = strings.Repeat(" ", helpColumn) + word
				col = len(line)
			}
		}
		fmt.Fprintln(w, line)
	}
}

// helpTail is what help adds to a setting's text: its default and its
// file form.
func (s Setting) helpTail() string {
	var parts []string
	if d := s.ShownDefault(); d != "" {
		parts = append(parts, "default "+d)
	}
	if s.FileForm {
		parts = append(parts, "secret: "+s.FileName()+" names a file holding it")
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, "; ") + ")"
}

// HelpEntry is the text WriteHelp gives a setting, on one line: the
// name, the help and its tail (tests look for it in --help with runs of
// white space made one space).
func (s Setting) HelpEntry() string {
	return strings.TrimSpace(s.Name + " " + s.Help + " " + s.helpTail())
}

// Unknown warns about each GITFLEET_* variable in environ ("NAME=value"
// entries, os.Environ) that is not declared, naming the closest declared
// one: a misspelt setting is otherwise silently ignored. Not an error: a
// newer deployment may set a variable this version does not know.
func Unknown(environ []string) []string {
	var known []string
	for _, s := range append(Settings(), ToolVars...) {
		known = append(known, s.members()...)
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "GITFLEET_") {
			continue
		}
		if _, ok := Lookup(name); ok {
			continue
		}
		out = append(out, fmt.Sprintf("warning: %s is not a gitfleet setting (did you mean %s?)", name, closest(name, known)))
	}
	sort.Strings(out)
	return out
}

// closest is the name in known at the least edit distance from name
// (Levenshtein), the first in the table's order on a tie.
func closest(name string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		if strings.HasSuffix(k, "*") {
			continue
		}
		d := editDistance(name, k)
		if !strings.HasPrefix(k, "GITFLEET_") {
			// GITHUB_TOKEN written with the GITFLEET_ prefix means it: the prefix
			// counts as one edit for the standard variables.
			d = min(d, editDistance(strings.TrimPrefix(name, "GITFLEET_"), k)+1)
		}
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance: the insertions, deletions and
// substitutions of a byte that make a into b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// WriteDocTable writes docs/settings.md's tables: every setting, then the
// variables that are no setting (ToolVars). TestSettingsDoc holds the doc
// to it.
func WriteDocTable(w io.Writer) {
	fmt.Fprintln(w, "| variable | kind | default | read by | meaning |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, s := range Settings() {
		if s.fileOf != "" {
			continue
		}
		name := "`" + s.Name + "`"
		if s.FileForm {
			name += " or `" + s.FileName() + "`"
		}
		kind := string(s.Kind)
		if s.Secret {
			kind += ", secret"
		}
		def := "—"
		switch {
		case s.Default != "":
			def = "`" + s.Default + "`"
			if s.Unit != "" {
				def += " " + s.Unit
			}
			if s.DefaultNote != "" {
				def += " (" + s.DefaultNote + ")"
			}
		case s.DefaultNote != "":
			def = s.DefaultNote
		}
		readers := s.Readers.String()
		if s.Via != "" {
			readers += " (" + s.Via + ")"
		}
		meaning := mdText(s.Help)
		if s.FileForm {
			meaning += "; `" + s.FileName() + "` names a file holding it (trailing white space dropped, an empty file is unset, not both)"
		}
		if s.Doc != "" {
			meaning += ". " + mdText(s.Doc)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", name, kind, mdText(def), mdText(readers), meaning)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Not settings of a gitfleet process, declared so that no warning names them:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| variable | read by | meaning |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, s := range ToolVars {
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", s.Name, mdText(s.Via), mdText(s.Help))
	}
}

// mdText escapes what Markdown would take for markup outside `code`
// spans: * (emphasis), < (a tag), | (a cell's end).
func mdText(s string) string {
	var b strings.Builder
	code := false
	for _, r := range s {
		switch {
		case r == '`':
			code = !code
		case code:
		case r == '*':
			b.WriteString(`\*`)
			continue
		case r == '<':
			b.WriteString("&lt;")
			continue
		case r == '|':
			b.WriteString(`\|`)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
