package report

import (
	"bufio"
	"io"
	"strconv"
	"strings"

	"gitfleet/internal/domain/textsafe"
)

// CSVHeader is the CSV report's first row.
var CSVHeader = []string{"Repository", "RuleID", "Commit", "File", "StartLine", "SecretHash", "Preview", "Decoded",
	"Status", "State", "SeenAgainAfterResolution", "Ignored", "Fingerprint", "Link"}

// CSV writes one row per occurrence under CSVHeader, RFC 4180 with every
// cell quoted: a spreadsheet in a locale whose separator is ";" would split
// an unquoted x;=1+1;y.env into cells and run the middle one. A repository
// names its own files, so a cell a spreadsheet would take for a formula is
// written with a leading apostrophe, and terminal controls (C0, C1,
// bidirectional overrides) as escapes (textsafe.Printable).
type CSV struct {
	w *bufio.Writer
}

// NewCSV starts a CSV report on w with its header.
func NewCSV(w io.Writer) (*CSV, error) {
	c := &CSV{w: bufio.NewWriter(w)}
	return c, c.write(CSVHeader)
}

func (c *CSV) write(row []string) error {
	for i, cell := range row {
		if i > 0 {
			c.w.WriteByte(',') //nolint:errcheck // bufio keeps the first error for Flush
		}
		c.w.WriteByte('"')                                   //nolint:errcheck // as above
		c.w.WriteString(strings.ReplaceAll(cell, `"`, `""`)) //nolint:errcheck // as above
		c.w.WriteByte('"')                                   //nolint:errcheck // as above
	}
	_, err := c.w.WriteString("\r\n")
	return err
}

// Write writes one row.
func (c *CSV) Write(o Occurrence) error {
	line := ""
	if o.Line > 0 {
		line = strconv.Itoa(o.Line)
	}
	row := []string{o.Repository, o.RuleID, o.Commit, o.File(), line, o.SecretHash, o.Preview, o.Decoded,
		o.Status, o.State, strconv.FormatBool(o.SeenAgain), string(o.Ignored), o.Fingerprint(), o.Link}
	for i, cell := range row {
		row[i] = noFormula(textsafe.Printable(cell))
	}
	return c.write(row)
}

// Close flushes the rows.
func (c *CSV) Close() error {
	return c.w.Flush()
}

// noFormula keeps a cell from being read as a formula (OWASP's CSV
// injection advice).
func noFormula(cell string) string {
	if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
		return "'" + cell
	}
	return cell
}
