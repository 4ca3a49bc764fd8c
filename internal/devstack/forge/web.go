package forge

import (
	"html/template"
	"net/http"
	"strings"
)

// The forge's web page: enough for the link `starter dev` prints to open in
// a browser. "/owner/name" shows a repository (its default branch, how to
// clone it, its code scanning alerts and uploads); a renamed repository's old name redirects, like GitHub. It
// answers whatever the Host (127.0.0.1:PORT, forge.localhost:PORT).

var webPage = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}} · demo forge</title></head>
<body style="font-family: sans-serif; max-width: 50em; margin: 2em auto">
<h1>{{.Repo.FullName}}</h1>
<p>Default branch: <code>{{.Repo.DefaultBranch}}</code></p>
<p>Clone: <code>git clone {{.Origin}}/{{.Repo.FullName}}.git</code></p>
<p>Collect: <code>bin/starter collect {{.Repo.FullName}}</code></p>
<h2>Code scanning</h2>
{{if .Alerts}}<table border="1" cellpadding="4" style="border-collapse: collapse">
<tr><th>#</th><th>State</th><th>Rule</th><th>Location</th><th>Message</th></tr>
{{range .Alerts}}<tr><td>{{.Number}}</td><td>{{.State}}{{if .DismissedReason}} ({{.DismissedReason}}){{end}}</td><td>{{.RuleID}}</td><td><code>{{.Path}}{{if .Line}}:{{.Line}}{{end}}</code></td><td>{{.Message}}</td></tr>
{{end}}</table>
{{else}}<p>No alerts: no SARIF upload processed.</p>{{end}}
{{if .Uploads}}<p>Uploads: {{range .Uploads}}<br><code>{{.ID}}</code> {{.Status}} for <code>{{.Ref}}</code> at <code>{{.CommitSHA}}</code>{{range .Errors}} — {{.}}{{end}}{{end}}</p>{{end}}
</body></html>
`))

// serveWeb serves the web pages; false if r is not for one.
func (f *Forge) serveWeb(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" || strings.HasSuffix(parts[1], ".git") {
		return false
	}
	who, _ := f.checkAuth(r)
	v, redirected, found := f.reg.resolve(parts[0], parts[1])
	if !found || !f.canSee(v, who) {
		return false
	}
	if redirected {
		http.Redirect(w, r, "/"+v.FullName(), http.StatusMovedPermanently)
		return true
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	cs := f.codeScanning()
	cs.mu.Lock()
	alerts := cs.alertsOf(v.ID)
	var uploads []SARIFUpload
	for _, id := range cs.order {
		if u := cs.uploads[id]; u.repoID == v.ID {
			uploads = append(uploads, u.SARIFUpload)
		}
	}
	cs.mu.Unlock()
	_ = webPage.Execute(w, struct {
		Title, Origin string
		Repo          Repo
		Alerts        []CodeScanningAlert
		Uploads       []SARIFUpload
	}{v.FullName(), origin(r), v.Repo, alerts, uploads})
	return true
}
