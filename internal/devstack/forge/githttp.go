package forge

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"os"
	"strconv"
	"strings"
)

// maxBufferedBody bounds how much of a chunked request body is buffered
// (CGI needs a Content-Length). Upload-pack requests are small.
const maxBufferedBody = 64 << 20

// gitService is what a git URL suffix asks for.
type gitService int

const (
	svcNone gitService = iota
	svcUploadPack
	svcReceivePack
)

// parseGitPath splits /{owner}/{name}[.git]/{suffix} and tells which service
// the request is for. ok is false for paths that are not git smart-HTTP
// requests.
func parseGitPath(r *http.Request) (owner, name string, dotGit bool, suffix string, svc gitService, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return
	}
	owner, name, suffix = parts[0], parts[1], parts[2]
	if n, cut := strings.CutSuffix(name, ".git"); cut {
		name, dotGit = n, true
	}
	switch suffix {
	case "info/refs":
		switch r.URL.Query().Get("service") {
		case "git-upload-pack":
			svc = svcUploadPack
		case "git-receive-pack":
			svc = svcReceivePack
		default:
			return // dumb HTTP: not supported, like GitHub
		}
	case "git-upload-pack":
		svc = svcUploadPack
	case "git-receive-pack":
		svc = svcReceivePack
	default:
		return
	}
	return owner, name, dotGit, suffix, svc, true
}

// serveGit serves git smart HTTP (upload-pack only) by running
// git http-backend as CGI on the repository's bare directory.
func (f *Forge) serveGit(w http.ResponseWriter, r *http.Request) {
	owner, name, dotGit, suffix, svc, ok := parseGitPath(r)
	if !ok {
		if f.serveWeb(w, r) {
			return
		}
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	who, auth := f.checkAuth(r)
	if auth == authBad {
		gitAuthChallenge(w, "Invalid username or token. Password authentication is not supported for Git operations.")
		return
	}
	v, redirected, found := f.reg.resolve(owner, name)
	// An installation token narrowed to metadata reads no private
	// repository's contents.
	if !found || !f.canSee(v, who) || (v.Private && !who.tok.readsContents()) {
		// GitHub does not say whether a repository exists to anonymous git
		// clients: it asks for credentials. With valid credentials, 404.
		if auth == authOK {
			http.Error(w, "Repository not found.", http.StatusNotFound)
			return
		}
		gitAuthChallenge(w, "")
		return
	}
	if redirected {
		loc := origin(r) + "/" + v.Owner + "/" + v.Name
		if dotGit {
			loc += ".git"
		}
		loc += "/" + suffix
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, loc, http.StatusMovedPermanently)
		return
	}
	if svc != svcUploadPack {
		http.Error(w, "forge: pushing over HTTP is not supported; change repositories through the Go API", http.StatusForbidden)
		return
	}

	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + strconv.FormatInt(v.ID, 10) + ".git/" + suffix
	r2.URL.RawPath = ""
	if r.Method == http.MethodPost {
		// Buffered: CGI needs a length (git sends large requests chunked),
		// and the fetch is counted by what it asks for.
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBufferedBody+1))
		if err != nil {
			http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > maxBufferedBody {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		f.stats.fetched(v.Owner+"/"+v.Name, body, r.Header.Get("Content-Encoding"))
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		r2.TransferEncoding = nil
		r2.Header.Del("Transfer-Encoding")
	}
	f.cgiHandler().ServeHTTP(w, r2)
}

func gitAuthChallenge(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
	if msg == "" {
		msg = "Authentication required."
	}
	http.Error(w, msg, http.StatusUnauthorized)
}

func (f *Forge) cgiHandler() *cgi.Handler {
	sink := io.Writer(io.Discard)
	if f.opts.Logf != nil {
		sink = logfWriter{f: f}
	}
	return &cgi.Handler{
		Path: f.backendPath,
		Dir:  f.reposDir,
		Env: []string{
			"GIT_PROJECT_ROOT=" + f.reposDir,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=" + os.DevNull,
			"LC_ALL=C",
		},
		Logger: log.New(sink, "forge cgi: ", 0),
		Stderr: sink,
	}
}

// logfWriter forwards writes (git's stderr) to Options.Logf.
type logfWriter struct{ f *Forge }

func (l logfWriter) Write(p []byte) (int, error) {
	if s := strings.TrimRight(string(p), "\n"); s != "" {
		l.f.logf("%s", s)
	}
	return len(p), nil
}
