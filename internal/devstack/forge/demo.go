package forge

import "strings"

// SeedDemo creates the demo's repositories (what `starter dev` shows and
// its documented outputs are checked on): demo/hello with a planted fake
// key in its second commit, demo/tools and acme/website.
func (fg *Forge) SeedDemo() error {
	type commit struct {
		files map[string]string
		msg   string
	}
	repos := map[string][]commit{
		"demo/hello": {
			{map[string]string{"README.md": "# hello\n\nThe demo repository.\n", "main.go": "package main\n\nfunc main() { println(\"hello\") }\n"}, "Initial commit"},
			// A planted (fake) key, so the scan has something to find;
			// built from parts so this file is no finding itself.
			{map[string]string{"config/app.env": "LOG_LEVEL=debug\nAWS_ACCESS_KEY_ID=" + "AKIA" + "DEMO7QX2LMN4ZP5K" + "\n"}, "Add configuration"},
		},
		"demo/tools":   {{map[string]string{"README.md": "# tools\n", "Makefile": "all:\n\techo tools\n"}, "Initial commit"}},
		"acme/website": {{map[string]string{"index.html": "<h1>acme</h1>\n"}, "Initial commit"}},
	}
	for _, full := range []string{"demo/hello", "demo/tools", "acme/website"} {
		owner, name, _ := strings.Cut(full, "/")
		if _, err := fg.CreateRepo(owner, name); err != nil {
			return err
		}
		for _, c := range repos[full] {
			if _, err := fg.Commit(owner, name, "main", c.files, c.msg); err != nil {
				return err
			}
		}
	}
	return nil
}
