package forge

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Code scanning, as GitHub documents it
// (https://docs.github.com/rest/code-scanning/code-scanning): a SARIF
// upload (POST .../code-scanning/sarifs, gzip + base64) is accepted at once
// (202 with its id) and processed after; GET .../sarifs/{id} says whether
// it is still pending, complete or failed (with the errors), and GET
// .../code-scanning/alerts lists the alerts of the latest complete upload
// of each tool and ref. A result with a suppression is a dismissed alert;
// one without, open. An installation token needs security_events: write
// to upload and read to look (403 "Resource not accessible by
// integration" otherwise, as on GitHub).
//
// Processing is done on the first look after the upload: the first GET of
// an upload answers "pending", the next its outcome, so a client's poll
// is exercised without any timing. What the forge checks of the SARIF:
// JSON, version 2.1.0, a runs array, each run's tool.driver.name, each
// result's message and, when given, its locations' URIs as relative
// paths, then the official SARIF 2.1.0 schema (sarifschema.go).

const docCodeScanning = "https://docs.github.com/rest/code-scanning/code-scanning"

// SARIFUpload is an upload the forge received, for tests and the web page.
type SARIFUpload struct {
	ID        string
	Repo      string // owner/name when it was uploaded
	CommitSHA string
	Ref       string
	ToolName  string
	// SARIF is the decoded log as it was sent.
	SARIF []byte
	// Status is pending, complete or failed; Errors says why it failed.
	Status   string
	Errors   []string
	Received time.Time
}

// CodeScanningAlert is an alert of a repository's latest complete upload.
type CodeScanningAlert struct {
	Number          int
	RuleID          string
	Path            string
	Line            int
	Message         string
	State           string // open or dismissed
	DismissedReason string
	Fingerprint     string
	Commit, Ref     string
}

type scanUpload struct {
	SARIFUpload
	repoID int64
	looked bool // the first GET answered pending
	fail   string
	alerts []CodeScanningAlert
}

type codeScanning struct {
	once    sync.Once
	mu      sync.Mutex
	uploads map[string]*scanUpload
	order   []string
	// numbers are alert numbers by repository and fingerprint: an alert
	// keeps its number across uploads.
	numbers map[int64]map[string]int
	// failNext makes the next uploads' processing fail (FailSARIFProcessing).
	failNext int
}

var hexSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

func (f *Forge) codeScanning() *codeScanning {
	cs := &f.scanning
	cs.once.Do(func() { cs.uploads, cs.numbers = map[string]*scanUpload{}, map[int64]map[string]int{} })
	return cs
}

// FailSARIFProcessing makes the processing of the next n uploads fail, as
// GitHub's does for a SARIF it cannot ingest.
func (f *Forge) FailSARIFProcessing(n int) {
	cs := f.codeScanning()
	cs.mu.Lock()
	cs.failNext = n
	cs.mu.Unlock()
}

// SARIFUploads lists the uploads of a repository (by its id, whatever it
// is called now), oldest first, processed as a GET would process them.
func (f *Forge) SARIFUploads(owner, name string) []SARIFUpload {
	r, ok := f.Lookup(owner, name)
	if !ok {
		return nil
	}
	cs := f.codeScanning()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []SARIFUpload
	for _, id := range cs.order {
		u := cs.uploads[id]
		if u.repoID == r.ID {
			cs.process(u)
			out = append(out, u.SARIFUpload)
		}
	}
	return out
}

// CodeScanningAlerts are the alerts of a repository's latest complete
// upload (every tool and ref), by number.
func (f *Forge) CodeScanningAlerts(owner, name string) []CodeScanningAlert {
	r, ok := f.Lookup(owner, name)
	if !ok {
		return nil
	}
	cs := f.codeScanning()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.alertsOf(r.ID)
}

// alertsOf takes cs.mu.
func (cs *codeScanning) alertsOf(repoID int64) []CodeScanningAlert {
	latest := map[string]*scanUpload{} // by tool and ref
	for _, id := range cs.order {
		u := cs.uploads[id]
		if u.repoID != repoID {
			continue
		}
		cs.process(u)
		if u.Status == "complete" {
			latest[u.ToolName+"\x00"+u.Ref] = u
		}
	}
	var out []CodeScanningAlert
	for _, u := range latest {
		out = append(out, u.alerts...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// process decides an upload's outcome (once).
func (cs *codeScanning) process(u *scanUpload) {
	if u.Status != "pending" {
		return
	}
	if u.fail != "" {
		u.Status, u.Errors = "failed", []string{u.fail}
		return
	}
	alerts, errs := parseSARIF(u.SARIF)
	if len(errs) == 0 {
		errs = schemaErrors(u.SARIF)
	}
	if len(errs) > 0 {
		u.Status, u.Errors = "failed", errs
		return
	}
	nums := cs.numbers[u.repoID]
	if nums == nil {
		nums = map[string]int{}
		cs.numbers[u.repoID] = nums
	}
	for i := range alerts {
		a := &alerts[i]
		n, ok := nums[a.Fingerprint]
		if !ok {
			n = len(nums) + 1
			nums[a.Fingerprint] = n
		}
		a.Number, a.Commit, a.Ref = n, u.CommitSHA, u.Ref
	}
	// One alert per fingerprint: the first result with it.
	seen := map[int]bool{}
	u.alerts = alerts[:0]
	for _, a := range alerts {
		if !seen[a.Number] {
			seen[a.Number] = true
			u.alerts = append(u.alerts, a)
		}
	}
	u.Status = "complete"
}

// sarifLog is what the forge reads of a SARIF log.
type sarifLog struct {
	Version *string `json:"version"`
	Runs    *[]struct {
		Tool struct {
			Driver struct {
				Name string `json:"name"`
			} `json:"driver"`
		} `json:"tool"`
		Results []struct {
			RuleID  string `json:"ruleId"`
			Message struct {
				Text string `json:"text"`
			} `json:"message"`
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct {
						URI string `json:"uri"`
					} `json:"artifactLocation"`
					Region *struct {
						StartLine int `json:"startLine"`
					} `json:"region"`
				} `json:"physicalLocation"`
			} `json:"locations"`
			PartialFingerprints map[string]string `json:"partialFingerprints"`
			Suppressions        []struct {
				Kind          string `json:"kind"`
				Status        string `json:"status"`
				Justification string `json:"justification"`
			} `json:"suppressions"`
		} `json:"results"`
	} `json:"runs"`
}

// parseSARIF checks a log and makes its alerts (numbers not yet given).
func parseSARIF(b []byte) ([]CodeScanningAlert, []string) {
	var l sarifLog
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, []string{"Unable to parse the SARIF file: " + err.Error()}
	}
	var errs []string
	switch {
	case l.Version == nil:
		errs = append(errs, "instance requires property \"version\"")
	case *l.Version != "2.1.0":
		errs = append(errs, fmt.Sprintf("Unsupported SARIF version %q: only 2.1.0 is supported", *l.Version))
	}
	if l.Runs == nil {
		return nil, append(errs, "instance requires property \"runs\"")
	}
	var out []CodeScanningAlert
	for ri, run := range *l.Runs {
		if run.Tool.Driver.Name == "" {
			errs = append(errs, fmt.Sprintf("runs[%d].tool.driver requires property \"name\"", ri))
		}
		for i, r := range run.Results {
			where := fmt.Sprintf("runs[%d].results[%d]", ri, i)
			if r.Message.Text == "" {
				errs = append(errs, where+".message requires property \"text\"")
			}
			a := CodeScanningAlert{RuleID: r.RuleID, Message: r.Message.Text, State: "open"}
			if len(r.Locations) > 0 {
				pl := r.Locations[0].PhysicalLocation
				a.Path = pl.ArtifactLocation.URI
				if strings.Contains(a.Path, "://") || strings.HasPrefix(a.Path, "/") {
					errs = append(errs, where+": location "+strconv.Quote(a.Path)+" is not a path of the repository")
				}
				if pl.Region != nil {
					a.Line = pl.Region.StartLine
				}
			}
			for _, s := range r.Suppressions {
				if s.Status == "" || s.Status == "accepted" {
					a.State, a.DismissedReason = "dismissed", dismissedReason(s.Justification)
				}
			}
			for _, k := range sortedKeys(r.PartialFingerprints) {
				a.Fingerprint += k + "=" + r.PartialFingerprints[k] + ";"
			}
			if a.Fingerprint == "" {
				a.Fingerprint = fmt.Sprintf("%s:%s:%d", a.RuleID, a.Path, a.Line)
			}
			out = append(out, a)
		}
	}
	return out, errs
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// dismissedReason is the code scanning reason a suppression's
// justification comes closest to.
func dismissedReason(j string) string {
	switch {
	case strings.Contains(j, "false"):
		return "false positive"
	case strings.Contains(j, "test"):
		return "used in tests"
	}
	return "won't fix"
}

// codeScanningAllowed answers 401/403 unless the caller may use code
// scanning at level ("read" or "write"): a user's or the admin's token
// may, an installation token with security_events at that level may.
func (c *apiCall) codeScanningAllowed(level string) bool {
	switch {
	case c.who.inst != nil:
		c.f.acct.mu.RLock()
		got := c.who.tok.perms["security_events"]
		c.f.acct.mu.RUnlock()
		if levels[got] < levels[level] {
			c.error(http.StatusForbidden, "Resource not accessible by integration", docCodeScanning)
			return false
		}
		return true
	case c.who.user != nil || c.who.admin:
		return true
	}
	c.error(http.StatusUnauthorized, "Requires authentication", docCodeScanning)
	return false
}

// POST /repos/{owner}/{repo}/code-scanning/sarifs
func postSARIF(c *apiCall) {
	v, ok := c.resolveRepo("/code-scanning/sarifs")
	if !ok || !c.codeScanningAllowed("write") {
		return
	}
	var req struct {
		CommitSHA string `json:"commit_sha"`
		Ref       string `json:"ref"`
		SARIF     string `json:"sarif"`
		ToolName  string `json:"tool_name"`
	}
	body, err := io.ReadAll(io.LimitReader(c.r.Body, 20<<20))
	if err != nil || json.Unmarshal(body, &req) != nil {
		c.error(http.StatusBadRequest, "Problems parsing JSON", docCodeScanning)
		return
	}
	switch {
	case !hexSHA.MatchString(req.CommitSHA):
		c.error(http.StatusUnprocessableEntity, "Invalid request.\n\n"+strconv.Quote(req.CommitSHA)+" is not a valid commit_sha", docCodeScanning)
		return
	case !strings.HasPrefix(req.Ref, "refs/"):
		c.error(http.StatusUnprocessableEntity, "Invalid request.\n\n"+strconv.Quote(req.Ref)+" is not a valid ref", docCodeScanning)
		return
	}
	gz, err := base64.StdEncoding.DecodeString(req.SARIF)
	if err != nil {
		c.error(http.StatusBadRequest, "Invalid sarif: not base64", docCodeScanning)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		c.error(http.StatusBadRequest, "Invalid sarif: not gzip", docCodeScanning)
		return
	}
	// GitHub's bound: 10 MB gzip, the log itself much larger.
	raw, err := io.ReadAll(io.LimitReader(zr, 100<<20))
	if err != nil {
		c.error(http.StatusBadRequest, "Invalid sarif: not gzip", docCodeScanning)
		return
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	u := &scanUpload{repoID: v.ID, SARIFUpload: SARIFUpload{ID: hex.EncodeToString(id[:]), Repo: v.FullName(),
		CommitSHA: req.CommitSHA, Ref: req.Ref, ToolName: req.ToolName, SARIF: raw, Status: "pending", Received: c.f.now()}}
	cs := c.f.codeScanning()
	cs.mu.Lock()
	if cs.failNext > 0 {
		cs.failNext--
		u.fail = "An error occurred while processing the SARIF file (forced by the forge)"
	}
	cs.uploads[u.ID] = u
	cs.order = append(cs.order, u.ID)
	cs.mu.Unlock()
	c.json(http.StatusAccepted, map[string]string{"id": u.ID,
		"url": c.apiBase() + "repos/" + v.FullName() + "/code-scanning/sarifs/" + u.ID})
}

// GET /repos/{owner}/{repo}/code-scanning/sarifs/{sarif_id}
func getSARIF(c *apiCall) {
	v, ok := c.resolveRepo("/code-scanning/sarifs/" + c.param("sarif_id"))
	if !ok || !c.codeScanningAllowed("read") {
		return
	}
	cs := c.f.codeScanning()
	cs.mu.Lock()
	u := cs.uploads[c.param("sarif_id")]
	if u == nil || u.repoID != v.ID {
		cs.mu.Unlock()
		c.notFound(docCodeScanning)
		return
	}
	if !u.looked {
		u.looked = true
	} else {
		cs.process(u)
	}
	status, errs := u.Status, u.Errors
	cs.mu.Unlock()
	out := map[string]any{"processing_status": status,
		"analyses_url": c.apiBase() + "repos/" + v.FullName() + "/code-scanning/analyses?sarif_id=" + u.ID}
	if status == "failed" {
		out["errors"] = errs
	} else {
		out["errors"] = nil
	}
	c.json(http.StatusOK, out)
}

// GET /repos/{owner}/{repo}/code-scanning/alerts (?state=open|dismissed)
func getCodeScanningAlerts(c *apiCall) {
	v, ok := c.resolveRepo("/code-scanning/alerts")
	if !ok || !c.codeScanningAllowed("read") {
		return
	}
	cs := c.f.codeScanning()
	cs.mu.Lock()
	alerts := cs.alertsOf(v.ID)
	cs.mu.Unlock()
	state := c.r.URL.Query().Get("state")
	items := []any{}
	for _, a := range alerts {
		if state != "" && a.State != state {
			continue
		}
		url := c.apiBase() + "repos/" + v.FullName() + "/code-scanning/alerts/" + strconv.Itoa(a.Number)
		j := map[string]any{
			"number": a.Number, "state": a.State, "url": url,
			"html_url": c.origin() + "/" + v.FullName() + "/security/code-scanning/" + strconv.Itoa(a.Number),
			"rule":     map[string]any{"id": a.RuleID, "severity": "error", "description": a.RuleID},
			"tool":     map[string]any{"name": "gitfleet"},
			"most_recent_instance": map[string]any{"ref": a.Ref, "commit_sha": a.Commit, "state": a.State,
				"message":  map[string]string{"text": a.Message},
				"location": map[string]any{"path": a.Path, "start_line": a.Line}},
			"dismissed_reason": nil,
		}
		if a.State == "dismissed" {
			j["dismissed_reason"] = a.DismissedReason
		}
		items = append(items, j)
	}
	c.json(http.StatusOK, items)
}
