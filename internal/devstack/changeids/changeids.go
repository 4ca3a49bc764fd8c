// Package changeids finds the change ids a package's workflows ask for, by
// reading its source: every call of version(ctx, id, …),
// workflow.GetVersion(ctx, id, …) and versioning.Version(ctx, id, …) whose
// id is a string constant. The replay tests hold the declared change ids
// (workflows/changes.go) against it, and `make docs-check` counts them.
package changeids

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Use is one place a change id is asked for.
type Use struct {
	ID   string
	Func string // the enclosing function or method
	Pos  string // file:line
}

// Scan reads the non-test Go files of dir and returns every change id asked
// for with a constant id, sorted by id then position. A call whose id is not
// a constant (a helper passing its parameter on) is not a use.
func Scan(dir string) ([]Use, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		src, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, n, src, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	consts := stringConsts(files)
	var uses []Use
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isVersionCall(call.Fun) || len(call.Args) < 2 {
					return true
				}
				id, ok := constString(call.Args[1], consts)
				if ok {
					p := fset.Position(call.Pos())
					uses = append(uses, Use{ID: id, Func: fn.Name.Name, Pos: fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)})
				}
				return true
			})
		}
	}
	sort.Slice(uses, func(i, j int) bool {
		if uses[i].ID != uses[j].ID {
			return uses[i].ID < uses[j].ID
		}
		return uses[i].Pos < uses[j].Pos
	})
	return uses, nil
}

// IDs is the distinct ids of uses, sorted.
func IDs(uses []Use) []string {
	var ids []string
	for i, u := range uses {
		if i == 0 || u.ID != uses[i-1].ID {
			ids = append(ids, u.ID)
		}
	}
	return ids
}

func isVersionCall(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name == "version"
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && (x.Name == "workflow" && f.Sel.Name == "GetVersion" || x.Name == "versioning" && f.Sel.Name == "Version")
	}
	return false
}

// stringConsts maps the package-level string constants to their values.
func stringConsts(files []*ast.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := literal(vs.Values[i]); ok {
							out[name.Name] = v
						}
					}
				}
			}
		}
	}
	return out
}

func constString(e ast.Expr, consts map[string]string) (string, bool) {
	if id, ok := e.(*ast.Ident); ok {
		v, ok := consts[id.Name]
		return v, ok
	}
	return literal(e)
}

func literal(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}
