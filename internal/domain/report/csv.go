package report

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
)

// CSVHeader is the CSV report's first row.
var CSVHeader = []string{"Repository", "RuleID", "Commit", "File", "StartLine", "SecretHash", "Preview", "Decoded",
	"Status", "State", "SeenAgainAfterResolution", "Ignored", "Fingerprint", "Link"}

// CSV writes one row per occurrence under CSVHeader. A cell a spreadsheet
// would take for a formula (a repository names its own files) is written
// with a leading apostrophe.
type CSV struct {
	w *csv.Writer
}

// NewCSV starts a CSV report on w with its header.
func NewCSV(w io.Writer) (*CSV, error) {
	c := &CSV{w: csv.NewWriter(w)}
	return c, c.w.Write(CSVHeader)
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
		row[i] = noFormula(cell)
	}
	return c.w.Write(row)
}

// Close flushes the rows.
func (c *CSV) Close() error {
	c.w.Flush()
	return c.w.Error()
}

// noFormula keeps a cell from being read as a formula (OWASP's CSV
// injection advice).
func noFormula(cell string) string {
	if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
		return "'" + cell
	}
	return cell
}
